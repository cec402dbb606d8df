"""Drive Helm's own engine (PyPI helm-python-sdk, which binds Helm v4's Go SDK) for
tests/integration/chart.rs: lint, render, and schema checks of a chart, in one process per batch.

Reads one JSON object on stdin: {"chart": PATH, "jobs": [JOB, ...]}, where a JOB is
  {"op": "lint", "values": {...}}
  {"op": "render", "values": {...}, "name": RELEASE, "namespace": NS}
  {"op": "schema", "values": {...}}
and writes one JSON list on stdout, a result per job: {"ok": true, "result": ...} or
{"ok": false, "error": MESSAGE}. Helm's errors are results, not failures of this script.
"""

import json
import sys

try:
    import helm_python as helm
except ImportError as e:
    sys.exit(
        f"helm-python-sdk is not importable by {sys.executable} ({e}): run scripts/test, "
        "which installs it into the peers' virtualenv, or `pip install helm-python-sdk==0.2.2`"
    )


def run(chart_dir, chart, job):
    values = job.get("values")
    op = job["op"]
    if op == "lint":
        return helm.lint(chart_dir, values, strict=True)
    if op == "schema":
        chart.validate_schema(values)
        return None
    if op == "render":
        # Rendering validates the values against values.schema.json first, as an install does.
        return chart.render(
            values,
            name=job.get("name", "hpa-bridge"),
            namespace=job.get("namespace", "hpa-bridge"),
            is_install=True,
        )
    raise ValueError(f"unknown op {op!r}")


def main():
    request = json.load(sys.stdin)
    results = []
    with helm.Chart.load(request["chart"]) as chart:
        for job in request["jobs"]:
            try:
                results.append({"ok": True, "result": run(request["chart"], chart, job)})
            except helm.HelmError as e:
                results.append({"ok": False, "error": str(e)})
    json.dump(results, sys.stdout)


if __name__ == "__main__":
    main()
