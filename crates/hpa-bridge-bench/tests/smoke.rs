//! `hpa-bridge-bench --quick` end to end: the real bench binary, its real exporter child
//! process, real TLS servers and load generator. Only the
//! shape of the report is checked (every section present, every measured number positive and
//! finite); timings are never asserted.

use std::process::Command;

use serde_json::Value;

fn positive(v: &Value, path: &str) -> f64 {
    let n = path
        .split('.')
        .try_fold(v, |v, k| match k.parse::<usize>() {
            Ok(i) => v.get(i),
            Err(_) => v.get(k),
        })
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} missing or not a number in {v:#}"));
    assert!(
        n.is_finite() && n > 0.0,
        "{path} = {n}, expected a positive number"
    );
    n
}

#[test]
fn quick_bench_writes_every_section() {
    let out = tempfile::tempdir().unwrap();
    let run = Command::new(env!("CARGO_BIN_EXE_hpa-bridge-bench"))
        .args(["--quick", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "bench failed\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let json: Value =
        serde_json::from_slice(&std::fs::read(out.path().join("benchmarks.json")).unwrap())
            .unwrap();

    positive(&json, "machine.cores");
    assert!(json["machine"]["cpuModel"]
        .as_str()
        .is_some_and(|s| !s.is_empty()));

    for side in ["baseline", "adapter"] {
        for field in [
            "requests",
            "seconds",
            "requestsPerSecond",
            "p50Us",
            "p99Us",
            "p999Us",
        ] {
            positive(&json, &format!("serve.{side}.{field}"));
        }
    }
    positive(&json, "serve.throughputRatio");
    // The status page with 1,000 scopes.
    for field in ["renderMs", "jsonMs", "pageBytes", "entryBytes"] {
        positive(&json, &format!("page.{field}"));
    }
    positive(&json, "serve.p99Ratio");
    positive(&json, "serve.responseBytes");

    let pages = json["parse"]["pages"].as_array().unwrap();
    assert!(!pages.is_empty());
    for i in 0..pages.len() {
        for field in [
            "bytes",
            "series",
            "wantedSeries",
            "newlineScanMbS",
            "adapterMbS",
            "parseAllMbS",
            "ratioToLimit",
            "speedupOverParseAll",
        ] {
            positive(&json, &format!("parse.pages.{i}.{field}"));
        }
    }
    // The worst page the parse limits admit, and the soak of replaced pods.
    let adversarial = json["parse"]["adversarial"].as_array().unwrap();
    assert!(!adversarial.is_empty());
    for i in 0..adversarial.len() {
        for field in [
            "bytes",
            "lines",
            "labelsPerLine",
            "newlineScanMbS",
            "adapterMbS",
        ] {
            positive(&json, &format!("parse.adversarial.{i}.{field}"));
        }
    }
    // The JSON source's parse: the status document, 90 levels deep, 100,000 extra keys.
    let documents: Vec<&str> = json["parse"]["json"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["document"].as_str().unwrap())
        .collect();
    assert_eq!(documents, ["seatunnel-status", "nested-90", "keys-100000"]);
    for i in 0..documents.len() {
        for field in [
            "bytes",
            "samples",
            "usPerPage",
            "ratioToStatus",
            "valueOnlyUsPerPage",
        ] {
            positive(&json, &format!("parse.json.{i}.{field}"));
        }
    }
    for field in [
        "rounds",
        "replacedPods",
        "rssBytesAfterSettle",
        "rssBytesAtEnd",
        "trackedSeriesAtSettle",
        "trackedSeriesAtEnd",
    ] {
        positive(&json, &format!("soak.{field}"));
    }
    assert_eq!(
        json["soak"]["trackedSeriesAtSettle"], json["soak"]["trackedSeriesAtEnd"],
        "replaced pods leave no series behind"
    );
    // Where the memory per target goes: the components add up to the VmRSS growth, and the
    // closed connections freed their two 8 KiB buffers each.
    for field in ["rssGrowthBytes", "liveGrowthBytes", "trackedSeries"] {
        positive(&json, &format!("memory.{field}"));
    }
    let rows = json["memory"]["rows"].as_array().unwrap();
    let sum: f64 = rows.iter().map(|r| r["bytes"].as_f64().unwrap()).sum();
    assert_eq!(sum, json["memory"]["rssGrowthBytes"].as_f64().unwrap());
    positive(&json, "memory.rows.0.bytesPerTarget");
    // The deletion-cost writer over churning pods: its patches, how soon, how fast,
    // and the floor's latency with it on and off; every patch is its own.
    for field in [
        "changes",
        "patches",
        "patchesPerChange",
        "changeToPatchP50Seconds",
        "changeToPatchP99Seconds",
        "peakPatchesPerSecond",
        "writerOn.p99Us",
        "writerOff.p99Us",
    ] {
        positive(&json, &format!("deletionCost.{field}"));
    }
    assert_eq!(
        json["deletionCost"]["foreignPatches"], 0,
        "{:#}",
        json["deletionCost"]
    );

    for field in [
        "targets",
        "workloads",
        "intervalSeconds",
        "cpuSecondsPerRound",
        "maxRoundSeconds",
        "rssBytesBefore",
        "rssBytes",
        "hwmBytes",
        "trackedSeries",
        "bytesPerSeries",
        "bytesPerTarget",
        "freshness.p50Seconds",
        "freshness.maxSeconds",
        "freshness.limitSeconds",
        "wantedSeriesPerTarget",
        "answerCost.smallUs",
        "answerCost.largeUs",
        "answerCost.ratio",
        "answerCost.fewUs",
        "answerCost.fewRatio",
        "answerCost.smallScopeSeries",
        "answerCost.largeScopeSeries",
        "objectAnswerAfterChange.unchangedP50Us",
        "objectAnswerAfterChange.changedP50Us",
        "objectAnswerAfterChange.factsBuiltAhead",
        "coldRound.seconds",
    ] {
        positive(&json, &format!("scale.{field}"));
    }
    assert_eq!(json["scale"]["coldRound"]["failedTargets"], 0);
    for (i, r) in json["scale"]["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        positive(r, "seconds");
        assert_eq!(r["failedTargets"], 0, "round {i}");
    }

    // Serve under live load and with a slow Kubernetes API.
    for side in ["baseline", "reuseOn", "reuseOff"] {
        for field in [
            "requestsPerSecond",
            "p50Us",
            "p99Us",
            "p999Us",
            "serverCpuUsPerRequest",
        ] {
            positive(&json, &format!("live.{side}.{field}"));
        }
    }
    positive(&json, "live.trackedSeries");
    for side in ["prompt", "delayed"] {
        for field in ["requestsPerSecond", "p99Us"] {
            positive(&json, &format!("slowapi.{side}.{field}"));
        }
    }
    positive(&json, "slowapi.p99Ratio");
    positive(&json, "slowapi.delayedSyncSeconds");

    assert_eq!(json["prometheus"]["measured"], true);
    for field in [
        "concurrentRequests",
        "queriesPerAnswer",
        "naiveQueries",
        "queriesCoalescingOnly",
        "queriesWithCache",
        "queriesPerRequest",
        "queriesPerRequestWithCache",
        "naiveQueriesPerRequest",
        "burstMs",
    ] {
        positive(&json, &format!("prometheus.{field}"));
    }
    // Coalescing must send fewer queries than a naive adapter would: a shape check, not a timing.
    // Both figures are checked present and finite first (`positive`), so a missing one cannot
    // pass the comparison.
    let coalescing = positive(&json, "prometheus.queriesCoalescingOnly");
    let naive = positive(&json, "prometheus.naiveQueries");
    assert!(coalescing < naive, "{:#}", json["prometheus"]);

    // Every figure with a goal has a verdict, and the Markdown table lists every figure.
    let md = std::fs::read_to_string(out.path().join("BENCHMARKS.md")).unwrap();
    let figures = json["figures"].as_array().expect("figures");
    assert!(!figures.is_empty(), "no figures in {json:#}");
    for f in figures {
        if !f["goal"].is_null() {
            assert!(f["met"].is_boolean(), "{f}");
            positive(f, "ratio");
        }
        assert!(
            md.contains(f["name"].as_str().unwrap()),
            "{f} not in the table"
        );
    }
    assert!(md.contains("other processes") || md.contains("Other processes"));
}
