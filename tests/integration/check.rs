//! `hpa-bridge check`: the real binary on manifest fixtures (tests/fixtures/check/), and
//! `--cluster` against a loopback HTTPS server that plays the kube-apiserver.
//!
//! No kube-apiserver exists here. The fake API server serves recorded, schema-valid JSON
//! (tests/fixtures/check/cluster/) over real TLS to the real kube client inside the binary,
//! and proxies `/apis/external.metrics.k8s.io/...` over HTTPS to the real adapter binary,
//! the way the aggregator does, so the answers `check` reports are the adapter's own.

use crate::common;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use crate::common::*;
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/check")
        .join(name)
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }

    fn codes(&self) -> BTreeSet<String> {
        self.json()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap().to_string())
            .collect()
    }

    fn findings(&self, code: &str) -> Vec<Value> {
        self.json()["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["code"] == code)
            .cloned()
            .collect()
    }
}

fn check(args: &[&str]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .arg("check")
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .expect("run hpa-bridge check");
    Run {
        code: out.status.code().expect("exit code"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn check_file(name: &str, extra: &[&str]) -> Run {
    let path = fixture(name);
    let mut args = vec!["-o", "json", "-f", path.to_str().unwrap()];
    args.extend_from_slice(extra);
    check(&args)
}

fn set(codes: &[&str]) -> BTreeSet<String> {
    codes.iter().map(|s| s.to_string()).collect()
}

#[test]
fn a_correct_hpa_has_no_findings() {
    let r = check_file("good.yaml", &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
    assert_eq!(r.json()["summary"]["hpasChecked"], 1);
    // The table says so too.
    let t = check(&["-f", fixture("good.yaml").to_str().unwrap()]);
    assert_eq!(t.code, 0);
    assert!(
        t.stdout.starts_with("no findings (1 HPA checked)"),
        "{}",
        t.stdout
    );
}

#[test]
fn each_fixture_gives_exactly_its_findings() {
    let cases: &[(&str, &[&str], &[&str], i32)] = &[
        ("value-path.yaml", &[], &["HB001", "HB003"], 1),
        ("average-value.yaml", &[], &["HB002"], 1),
        ("type-mismatch.yaml", &[], &["HB003"], 0),
        ("names.yaml", &[], &["HB004", "HB005"], 1),
        ("selector.yaml", &[], &["HB006"], 0),
        ("tolerance.yaml", &[], &["HB008"], 0),
        ("tolerance-set.yaml", &[], &[], 0),
        (
            "tolerance-set.yaml",
            &["--kube-version", "1.32"],
            &["HB008", "HB009"],
            0,
        ),
        ("windows.yaml", &[], &["HB010", "HB011"], 0),
        (
            "windows.yaml",
            &["--max-scale-up-time", "15m"],
            &["HB010"],
            0,
        ),
        (
            "windows.yaml",
            &["--recommender-window", "30s", "--max-scale-up-time", "15m"],
            &[],
            0,
        ),
        // minReplicas 0: allowed by default from 1.37, the default version; whether the
        // recommendation comes from the workload's own pods cannot be told (HB023, warning).
        ("min-zero.yaml", &[], &["HB023"], 0),
        (
            "min-zero.yaml",
            &["--kube-version", "1.36"],
            &["HB012", "HB023"],
            1,
        ),
        (
            "min-zero.yaml",
            &["--kube-version", "1.36", "--scale-to-zero"],
            &["HB023"],
            0,
        ),
        ("two-hpas.yaml", &[], &["HB020"], 1),
        ("keda.yaml", &[], &["HB021"], 1),
        ("gitops-replicas.yaml", &[], &["HB022"], 0),
        ("zero-recommender.yaml", &[], &["HB023"], 0),
        ("deployment-floor.yaml", &[], &["HB013"], 0),
        ("deployment-floor-opted-in.yaml", &[], &[], 0),
        ("ordinals.yaml", &[], &["HB014"], 1),
        ("no-floor.yaml", &[], &["HB015"], 0),
        ("apiservice.yaml", &[], &["HB016", "HB017"], 1),
        (
            "apiservice.yaml",
            &["--adapter-service", "keda/keda-operator-metrics-apiserver"],
            &["HB017"],
            1,
        ),
    ];
    for (file, extra, want, code) in cases {
        let r = check_file(file, extra);
        assert_eq!(
            r.codes(),
            set(want),
            "{file} {extra:?}: {}\n{}",
            r.stdout,
            r.stderr
        );
        assert_eq!(r.code, *code, "{file} {extra:?} exit code: {}", r.stdout);
    }
}

/// HB013's fix names the opt-in annotation and the flag.
#[test]
fn a_floor_on_a_deployment_points_at_deletion_cost() {
    let r = check_file("deployment-floor.yaml", &[]);
    let fix = r.findings("HB013")[0]["fix"].as_str().unwrap().to_string();
    for part in [
        "hpa-bridge.io/deletion-cost",
        "stateful-index",
        "--write-deletion-cost",
    ] {
        assert!(fix.contains(part), "{part:?} not in {fix}");
    }
}

#[test]
fn findings_name_the_object_and_field_and_link_the_docs() {
    let r = check_file("value-path.yaml", &[]);
    let f = &r.findings("HB001")[0];
    assert_eq!(f["severity"], "error");
    assert_eq!(f["object"]["kind"], "HorizontalPodAutoscaler");
    assert_eq!(f["object"]["namespace"], "games");
    assert_eq!(f["object"]["name"], "lobby");
    assert_eq!(f["field"], "spec.metrics[0].external.target.value");
    assert_eq!(
        f["docs"],
        "docs/check.md#hb001-absolute-metric-through-the-value-path"
    );
    assert!(f["source"]
        .as_str()
        .unwrap()
        .ends_with("value-path.yaml (document 1)"));
    assert!(!f["why"].as_str().unwrap().is_empty() && !f["fix"].as_str().unwrap().is_empty());
    assert_eq!(
        r.findings("HB003")[0]["field"],
        "spec.metrics[0].external.target.type"
    );

    // Every docs link in every fixture's findings points at a heading that exists.
    let docs = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/check.md"))
        .unwrap();
    let dir = fixture("");
    let r = check(&["-o", "json", "-f", dir.to_str().unwrap()]);
    // The directory also holds invalid.yaml: unusable input wins, with a precise message.
    assert_eq!(r.code, 2, "{}", r.stdout);
    for name in [
        "value-path.yaml",
        "names.yaml",
        "selector.yaml",
        "windows.yaml",
        "ordinals.yaml",
        "apiservice.yaml",
        "deployment-floor.yaml",
        "no-floor.yaml",
        "min-zero.yaml",
        "tolerance.yaml",
        "average-value.yaml",
    ] {
        for f in check_file(name, &["--kube-version", "1.32"]).json()["findings"]
            .as_array()
            .unwrap()
        {
            let anchor = f["docs"].as_str().unwrap().split('#').nth(1).unwrap();
            let heading = format!(
                "## {}: {}",
                f["code"].as_str().unwrap(),
                f["title"].as_str().unwrap()
            );
            assert!(docs.contains(&heading), "{heading} missing for #{anchor}");
        }
    }
}

#[test]
fn tolerance_reports_the_exact_replica_counts_per_version() {
    // From 1.33 the band is inclusive: at 10 replicas, 11 (ratio 1.1) is inside.
    let new = check_file("tolerance.yaml", &[]);
    let m = new.findings("HB008")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("above the current count is ignored from 10 replicas"),
        "{m}"
    );
    assert!(m.contains("below is ignored from 10 replicas"), "{m}");
    assert!(
        m.contains("at maxReplicas 50, recommendations up to 5 replica(s) lower"),
        "{m}"
    );
    // Before 1.33, |1 - 1.1| is 0.10000000000000009 > 0.1: steps up are acted on at 10.
    let old = check_file("tolerance.yaml", &["--kube-version", "1.32"]);
    let m = old.findings("HB008")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("above the current count is ignored from 11 replicas"),
        "{m}"
    );
    assert!(m.contains("below is ignored from 10 replicas"), "{m}");
    // A tighter cluster tolerance moves the threshold: 1/r <= 0.05 from 20 replicas.
    let tight = check_file("tolerance.yaml", &["--cluster-tolerance", "0.05"]);
    let m = tight.findings("HB008")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(m.contains("ignored from 20 replicas"), "{m}");
    // A dropped per-HPA tolerance falls back to the cluster default.
    let dropped = check_file("tolerance-set.yaml", &["--kube-version", "1.32"]);
    assert_eq!(dropped.findings("HB009").len(), 2);
    let fields: BTreeSet<String> = dropped
        .findings("HB009")
        .iter()
        .map(|f| f["field"].as_str().unwrap().to_string())
        .collect();
    assert!(fields.contains("spec.behavior.scaleUp.tolerance"));
    assert!(fields.contains("spec.behavior.scaleDown.tolerance"));
}

#[test]
fn ordinals_offset_is_fine_with_kubernetes_discovery() {
    let r = check_file("ordinals.yaml", &[]);
    let f = &r.findings("HB014")[0];
    assert_eq!(f["object"]["kind"], "StatefulSet");
    assert_eq!(f["field"], "spec.ordinals.start");
    // Two HPAs on the same StatefulSet: the workload's finding is reported once.
    let both = check(&[
        "-o",
        "json",
        "-f",
        fixture("ordinals.yaml").to_str().unwrap(),
        fixture("tolerance.yaml").to_str().unwrap(),
    ]);
    assert_eq!(both.findings("HB014").len(), 1, "{}", both.stdout);
    let config = fixture("discovery-config.yaml");
    let r = check_file("ordinals.yaml", &["--config", config.to_str().unwrap()]);
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
    assert_eq!(r.code, 0);
}

#[test]
fn scale_up_finding_states_the_simulated_time() {
    let r = check_file("windows.yaml", &[]);
    let m = r.findings("HB011")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    // Pods 1 per 120 s from 2 to 9: seven additions at 0, 120, ..., 720 s.
    assert!(m.contains("from 2 to maxReplicas 9 takes 720s"), "{m}");
    let w = &r.findings("HB010")[0];
    assert_eq!(
        w["field"],
        "spec.behavior.scaleDown.stabilizationWindowSeconds"
    );
}

#[test]
fn lists_json_and_stdin_are_read() {
    let dir = tempfile::tempdir().unwrap();
    // kubectl get hpa -o json: a typed List whose items omit kind and apiVersion.
    let good: Vec<Value> =
        yaml_serde::Deserializer::from_str(&std::fs::read_to_string(fixture("good.yaml")).unwrap())
            .map(|d| serde::Deserialize::deserialize(d).unwrap())
            .collect();
    let mut hpa = good[1].clone();
    hpa.as_object_mut().unwrap().remove("kind");
    hpa.as_object_mut().unwrap().remove("apiVersion");
    let mut bad = hpa.clone();
    bad["spec"]["metrics"][0]["external"]["target"] =
        serde_json::json!({"type": "Value", "value": "1"});
    bad["metadata"]["name"] = "arena".into();
    // Its own workload: a second HPA on lobby would be HB020.
    bad["spec"]["scaleTargetRef"]["name"] = "arena".into();
    for m in bad["spec"]["metrics"].as_array_mut().unwrap() {
        m["external"]["metric"]["selector"]["matchLabels"]["hpa_target_name"] = "arena".into();
    }
    let list = serde_json::json!({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscalerList",
        "metadata": {}, "items": [hpa, bad]
    });
    let path = dir.path().join("hpas.json");
    std::fs::write(&path, list.to_string()).unwrap();
    let sts = dir.path().join("sts.yaml");
    std::fs::write(&sts, yaml_serde::to_string(&good[0]).unwrap()).unwrap();
    let r = check(&[
        "-o",
        "json",
        "-f",
        path.to_str().unwrap(),
        sts.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.codes(), set(&["HB001"]));
    let f = &r.findings("HB001")[0];
    assert_eq!(f["object"]["name"], "arena");
    assert!(f["source"]
        .as_str()
        .unwrap()
        .ends_with("(document 1, items[1])"));

    // The same objects through stdin, as a kind: List.
    let v1list =
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [good[0], good[1]]});
    let mut child = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["check", "-o", "json", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(v1list.to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["hpasChecked"], 1);
    assert_eq!(v["findings"].as_array().unwrap().len(), 0);
}

#[test]
fn unusable_input_exits_2_naming_file_and_document() {
    let r = check_file("invalid.yaml", &[]);
    assert_eq!(r.code, 2);
    assert!(r.stdout.is_empty());
    assert!(
        r.stderr
            .contains("invalid.yaml: document 2: invalid YAML/JSON"),
        "{}",
        r.stderr
    );
    let r = check_file("no-such-file.yaml", &[]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("no-such-file.yaml"), "{}", r.stderr);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("h.yaml");
    std::fs::write(
        &p,
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\nspec: {maxReplicas: many, scaleTargetRef: {kind: StatefulSet, name: h}}\n",
    )
    .unwrap();
    let r = check(&["-f", p.to_str().unwrap()]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr
            .contains("h.yaml: document 1: HorizontalPodAutoscaler \"h\""),
        "{}",
        r.stderr
    );
    // Neither -f nor --cluster is a usage error.
    assert_eq!(check(&[]).code, 2);
    let bad = check(&[
        "--kube-version",
        "latest",
        "-f",
        fixture("good.yaml").to_str().unwrap(),
    ]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("--kube-version"), "{}", bad.stderr);
}

// ---- --cluster ------------------------------------------------------------------------------

/// A loopback HTTPS server playing the kube-apiserver: recorded objects, and the external
/// metrics API proxied to the real adapter.
struct FakeApiServer {
    port: u16,
    /// Every request as (method, path and query).
    requests: Arc<Mutex<Vec<(String, String)>>>,
    /// Paths answered 403, as for a checker whose role does not allow them.
    forbidden: Arc<Mutex<BTreeSet<String>>>,
}

const TOKEN: &str = "check-test-token";

impl FakeApiServer {
    /// Serves the objects in `tests/fixtures/check/{dir}/`.
    async fn start(
        pki: &Pki,
        dir: &'static str,
        apiservice: &'static str,
        adapter: HttpsClient,
    ) -> Self {
        let issued = pki.server();
        let (certs, key) = (issued.certs(), issued.key());
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests: Arc<Mutex<Vec<(String, String)>>> = Arc::default();
        let forbidden: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let (log, refused) = (requests.clone(), forbidden.clone());
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, log, refused, adapter) = (
                    acceptor.clone(),
                    log.clone(),
                    refused.clone(),
                    adapter.clone(),
                );
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = service_fn(move |req: http::Request<Incoming>| {
                        let (log, refused, adapter) =
                            (log.clone(), refused.clone(), adapter.clone());
                        async move {
                            Ok::<_, Infallible>(
                                handle(req, dir, apiservice, &log, &refused, &adapter).await,
                            )
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        FakeApiServer {
            port,
            requests,
            forbidden,
        }
    }

    fn kubeconfig(&self, pki: &Pki, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: checker\n  user:\n    token: {TOKEN}\ncontexts:\n- name: fake\n  context: {{cluster: fake, user: checker}}\ncurrent-context: fake\n",
                self.port,
                pki.ca_path().display()
            ),
        )
        .unwrap();
        path
    }

    fn requests(&self) -> Vec<String> {
        self.calls().into_iter().map(|(_, path)| path).collect()
    }

    /// Every request as (method, path and query).
    fn calls(&self) -> Vec<(String, String)> {
        self.requests.lock().unwrap().clone()
    }

    /// From now on `path` answers 403 Forbidden.
    fn forbid(&self, path: &str) {
        self.forbidden.lock().unwrap().insert(path.into());
    }

    /// `check --cluster -o json` against this server.
    async fn check_json(&self, pki: &Pki) -> Run {
        let kubeconfig = self.kubeconfig(pki, pki.dir.path());
        run_check_async(vec![
            "--cluster".into(),
            "--kubeconfig".into(),
            kubeconfig.display().to_string(),
            "-o".into(),
            "json".into(),
        ])
        .await
    }
}

fn respond(code: u16, body: String) -> http::Response<Full<Bytes>> {
    http::Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body)))
        .unwrap()
}

fn not_found(what: &str) -> http::Response<Full<Bytes>> {
    respond(
        404,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{what} not found"), "reason": "NotFound", "code": 404})
        .to_string(),
    )
}

async fn handle(
    req: http::Request<Incoming>,
    dir: &str,
    apiservice: &str,
    log: &Mutex<Vec<(String, String)>>,
    forbidden: &Mutex<BTreeSet<String>>,
    adapter: &HttpsClient,
) -> http::Response<Full<Bytes>> {
    let path_and_query = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    log.lock()
        .unwrap()
        .push((req.method().to_string(), path_and_query.clone()));
    let authorized = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        == Some(&format!("Bearer {TOKEN}"));
    if !authorized {
        return respond(
            401,
            r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}"#.into(),
        );
    }
    let path = req.uri().path();
    if forbidden.lock().unwrap().contains(path) {
        return respond(
            403,
            serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": format!("{path} is forbidden: User \"checker\" cannot list it"), "reason": "Forbidden", "code": 403})
            .to_string(),
        );
    }
    let read = |name: &str| std::fs::read_to_string(fixture(&format!("{dir}/{name}")));
    if path == "/apis/autoscaling/v2/horizontalpodautoscalers" {
        return respond(200, read("hpas.json").unwrap());
    }
    // A cluster without KEDA has no such resource: 404, as the API server answers.
    if path == "/apis/keda.sh/v1alpha1/scaledobjects" {
        return match read("scaledobjects.json") {
            Ok(body) => respond(200, body),
            Err(_) => not_found("the server could not find the requested resource"),
        };
    }
    let workload = path
        .strip_prefix("/apis/apps/v1/namespaces/")
        .and_then(|rest| rest.split_once('/'))
        .and_then(|(_, rest)| rest.split_once('/'));
    if let Some((resource @ ("statefulsets" | "deployments"), name)) = workload {
        let kind = resource.trim_end_matches('s');
        return match read(&format!("{kind}-{name}.json")) {
            Ok(body) => respond(200, body),
            Err(_) => not_found(&format!("{resource}.apps \"{name}\"")),
        };
    }
    if path == "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.external.metrics.k8s.io" {
        return respond(
            200,
            std::fs::read_to_string(fixture(&format!("cluster/{apiservice}"))).unwrap(),
        );
    }
    if path.starts_with("/apis/external.metrics.k8s.io/v1beta1/") {
        // The aggregator's job: forward to the adapter over HTTPS, hand back its answer.
        return match adapter.get(&path_and_query, &[]).await {
            Ok((code, body)) => respond(code, body),
            Err(e) => respond(
                503,
                serde_json::json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": format!("error trying to reach service: {e}"), "reason": "ServiceUnavailable", "code": 503})
                .to_string(),
            ),
        };
    }
    not_found(path)
}

fn page(metric: &str, workload: &str, instance: &str, value: &str) -> String {
    format!(
        "# TYPE {metric} gauge\n{metric}{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"{workload}\",service_instance_id=\"{instance}\"}} {value}\n"
    )
}

async fn run_check_async(args: Vec<String>) -> Run {
    tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        check(&refs)
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_mode_reports_the_adapters_answers() {
    let ex = TestExporter::start().await;
    ex.page("/ctl", page("hpa_expect_replicas", "lobby", "ctl-0", "3"));
    ex.page(
        "/lobby-0",
        page("hpa_stateful_index", "lobby", "lobby-0", "1"),
    );
    ex.page(
        "/lobby-1",
        page("hpa_stateful_index", "lobby", "lobby-1", "2"),
    );
    // bazaar's recommender exports NaN: the adapter refuses (503) rather than guess.
    ex.page(
        "/bazaar-ctl",
        page("hpa_expect_replicas", "bazaar", "ctl-0", "NaN"),
    );
    ex.page(
        "/bazaar-0",
        page("hpa_stateful_index", "bazaar", "bazaar-0", "1"),
    );
    // arena exports nothing at all: no series, 404.
    let config = fast_config(&[
        (ex.url("/ctl"), "games", "ctl-0"),
        (ex.url("/lobby-0"), "games", "lobby-0"),
        (ex.url("/lobby-1"), "games", "lobby-1"),
        (ex.url("/bazaar-ctl"), "games", "bazaar-ctl-0"),
        (ex.url("/bazaar-0"), "games", "bazaar-0"),
    ]);
    let adapter = AdapterProcess::start(&config).await;
    adapter
        .eventually(
            "games",
            "hpa_expect_replicas",
            "hpa_target_name=lobby",
            "lobby's value",
            |c, v| c == 200 && single_value(v).as_deref() == Some("3"),
        )
        .await;
    adapter
        .eventually(
            "games",
            "hpa_expect_replicas",
            "hpa_target_name=bazaar",
            "bazaar refused",
            |c, _| c == 503,
        )
        .await;

    let pki = Pki::new("fake-apiserver-ca");
    let server = FakeApiServer::start(&pki, "cluster", "apiservice.json", adapter.client()).await;
    let kubeconfig = server.kubeconfig(&pki, pki.dir.path());
    let r = run_check_async(vec![
        "--cluster".into(),
        "--kubeconfig".into(),
        kubeconfig.display().to_string(),
        "--config".into(),
        adapter.config_path().display().to_string(),
        "-o".into(),
        "json".into(),
    ])
    .await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.codes(), set(&["HB007", "HB018"]), "{}", r.stdout);

    // arena: both metrics have no series; the adapter's own message is quoted.
    let no_series = r.findings("HB007");
    assert_eq!(no_series.len(), 2, "{}", r.stdout);
    for f in &no_series {
        assert_eq!(f["object"]["name"], "arena");
        let m = f["message"].as_str().unwrap();
        assert!(m.contains("404 NotFound"), "{m}");
        assert!(m.contains("has no data"), "{m}");
    }
    // bazaar: the recommendation is refused with the adapter's reason; its floor is fine.
    let refused = r.findings("HB018");
    assert_eq!(refused.len(), 1, "{}", r.stdout);
    assert_eq!(refused[0]["object"]["name"], "bazaar");
    assert_eq!(refused[0]["field"], "spec.metrics[0].external.metric");
    let m = refused[0]["message"].as_str().unwrap();
    assert!(m.contains("503 ServiceUnavailable"), "{m}");
    assert!(m.contains("hpa_expect_replicas is invalid"), "{m}");
    // lobby is correct and its answers are fine: nothing about it.
    assert!(!r.stdout.contains("\"lobby\""), "{}", r.stdout);

    // The requests went the HPA's way: lower-cased metric, selector as labelSelector.
    let reqs = server.requests();
    assert!(
        reqs.iter().any(|p| p
            == "/apis/external.metrics.k8s.io/v1beta1/namespaces/games/hpa_expect_replicas?labelSelector=hpa%5Ftarget%5Fname%3Dlobby"),
        "{reqs:#?}"
    );
    assert!(reqs
        .iter()
        .any(|p| p == "/apis/apps/v1/namespaces/games/statefulsets/bazaar"));
    assert_eq!(
        reqs.iter()
            .filter(|p| p.starts_with("/apis/external.metrics.k8s.io/"))
            .count(),
        6
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_mode_flags_a_foreign_apiservice_and_does_not_query_it() {
    let adapter = AdapterProcess::start("").await;
    let pki = Pki::new("fake-apiserver-ca");
    let server =
        FakeApiServer::start(&pki, "cluster", "apiservice-keda.json", adapter.client()).await;
    let kubeconfig = server.kubeconfig(&pki, pki.dir.path());
    let r = server.check_json(&pki).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(r.codes(), set(&["HB016"]), "{}", r.stdout);
    let f = &r.findings("HB016")[0];
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("keda/keda-operator-metrics-apiserver"));
    assert_eq!(f["field"], "spec.service");
    assert!(!server
        .requests()
        .iter()
        .any(|p| p.starts_with("/apis/external.metrics.k8s.io/")));

    // A wrong token is an unusable cluster: exit 2 with the API error.
    let bad = pki.dir.path().join("bad-kubeconfig");
    std::fs::write(
        &bad,
        std::fs::read_to_string(&kubeconfig)
            .unwrap()
            .replace(TOKEN, "wrong"),
    )
    .unwrap();
    let r = run_check_async(vec![
        "--cluster".into(),
        "--kubeconfig".into(),
        bad.display().to_string(),
    ])
    .await;
    assert_eq!(r.code, 2, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stderr
            .contains("listing autoscaling/v2 HorizontalPodAutoscalers"),
        "{}",
        r.stderr
    );
}

/// Object metrics (docs/hpa-behaviour.md §6): a Value target and averageValue other than 1 are
/// flagged as on External metrics; and the selector-typo scenario warns on the External HPA
/// whose selector leaves the kind open, never on the Object one.
#[test]
fn object_metrics_and_the_selector_typo_scenario() {
    for (file, want, code) in [
        ("object-value.yaml", &["HB001", "HB002"][..], 1),
        ("object-good.yaml", &[][..], 0),
        // The two HPAs side by side also scale one StatefulSet (HB020); a cluster would hold
        // only one of them.
        ("selector-typo.yaml", &["HB006", "HB020"][..], 1),
    ] {
        let r = check_file(file, &[]);
        assert_eq!(r.codes(), set(want), "{file}: {}\n{}", r.stdout, r.stderr);
        assert_eq!(r.code, code, "{file} exit code: {}", r.stdout);
    }
    let r = check_file("selector-typo.yaml", &[]);
    let found = r.findings("HB006");
    assert_eq!(found.len(), 1, "{}", r.stdout);
    let text = found[0].to_string();
    assert!(
        text.contains("\"lobby\"") && !text.contains("lobby-object"),
        "{text}"
    );
    assert!(text.contains("Deployment games/lobby"), "{text}");
    assert!(text.contains("Object metric"), "{text}");
    let r = check_file("object-value.yaml", &[]);
    let value = r.findings("HB001");
    assert!(
        value[0]
            .to_string()
            .contains("spec.metrics[0].object.target.type"),
        "{}",
        r.stdout
    );
}

/// Writes `text` to `dir/name`.
fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

/// `check -o json --config CONFIG -f FILE`.
fn check_with_config(config: &Path, file: &Path) -> Run {
    check(&[
        "-o",
        "json",
        "--config",
        config.to_str().unwrap(),
        "-f",
        file.to_str().unwrap(),
    ])
}

/// docs/check.md HB020–HB022: one writer per workload.
#[test]
fn one_writer_per_workload() {
    // Two HPAs on games/lobby: each names the other; staging's lobby is another workload.
    let r = check_file("two-hpas.yaml", &[]);
    let two = r.findings("HB020");
    let names: BTreeSet<String> = two
        .iter()
        .map(|f| {
            assert_eq!(f["object"]["namespace"], "games", "{f}");
            assert_eq!(f["field"], "spec.scaleTargetRef");
            assert_eq!(f["severity"], "error");
            f["object"]["name"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(names, set(&["lobby", "lobby-cpu"]), "{}", r.stdout);
    assert!(two[0]["message"]
        .as_str()
        .unwrap()
        .contains("StatefulSet games/lobby is also scaled by HorizontalPodAutoscaler lobby-cpu"));
    assert!(two[0]["why"]
        .as_str()
        .unwrap()
        .contains("AmbiguousSelector"));
    // The examples hold two versions of one HPA, games/lobby (External and Object metrics):
    // documents with one name are one object, not two HPAs; and the StatefulSet leaves
    // spec.replicas to the HPA.
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/examples");
    let r = check(&["-o", "json", "-f", examples.to_str().unwrap()]);
    assert_eq!((r.code, r.codes()), (0, set(&[])), "{}", r.stdout);

    // KEDA: the ScaledObject's own HPA is neither a second HPA nor checked as the user's
    // (its s0-prometheus metric is KEDA's to serve).
    let r = check_file("keda.yaml", &[]);
    let keda = r.findings("HB021");
    assert_eq!(keda.len(), 1, "{}", r.stdout);
    assert_eq!(keda[0]["object"]["name"], "worker");
    let m = keda[0]["message"].as_str().unwrap();
    assert!(
        m.contains("ScaledObject jobs/worker") && m.contains("its HPA keda-hpa-worker"),
        "{m}"
    );
    assert!(!r.stdout.contains("\"keda-hpa-worker\""), "{}", r.stdout);
    assert_eq!(r.json()["summary"]["hpasChecked"], 1, "{}", r.stdout);

    // A GitOps tree fixing spec.replicas beside the HPA: a warning on the workload's field.
    let r = check_file("gitops-replicas.yaml", &[]);
    let fixed = r.findings("HB022");
    assert_eq!(fixed.len(), 1, "{}", r.stdout);
    assert_eq!(fixed[0]["severity"], "warning");
    assert_eq!(fixed[0]["object"]["kind"], "StatefulSet");
    assert_eq!(fixed[0]["field"], "spec.replicas");
    let m = fixed[0]["message"].as_str().unwrap();
    assert!(m.contains("the manifest sets spec.replicas: 3"), "{m}");
    assert!(fixed[0]["source"]
        .as_str()
        .unwrap()
        .ends_with("gitops-replicas.yaml (document 1)"));

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| write_file(dir.path(), name, text);
    // An HPA handed over to KEDA (transfer-hpa-ownership, the HPA's name in the ScaledObject)
    // is KEDA's own: no conflict.
    let keda = std::fs::read_to_string(fixture("keda.yaml")).unwrap();
    let transferred = keda.replacen(
        "spec:\n  scaleTargetRef: {name: worker}",
        "spec:\n  advanced: {horizontalPodAutoscalerConfig: {name: worker}}\n  scaleTargetRef: {name: worker}",
        1,
    );
    assert_ne!(transferred, keda);
    let p = write("transferred.yaml", &transferred);
    let r = check(&["-o", "json", "-f", p.to_str().unwrap()]);
    assert!(!r.codes().contains("HB021"), "{}", r.stdout);
    // Bad input is named precisely.
    for (name, text, message) in [
        (
            "so.yaml",
            "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: w}\nspec: {scaleTargetRef: {kind: Deployment}}\n",
            "so.yaml: document 1: ScaledObject \"w\": spec.scaleTargetRef.name is required",
        ),
        (
            "sts.yaml",
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: s}\nspec: {replicas: three}\n",
            "sts.yaml: document 1: StatefulSet \"s\": spec.replicas must be an integer, found \"three\"",
        ),
    ] {
        let r = check(&["-f", write(name, text).to_str().unwrap()]);
        assert_eq!(r.code, 2, "{name}");
        assert!(r.stderr.contains(message), "{}", r.stderr);
    }
}

/// docs/check.md HB012 and HB023: minReplicas 0 by Kubernetes version, and a recommender that
/// runs inside a workload that scales to zero.
#[test]
fn scale_to_zero_follows_the_version_and_flags_an_inside_recommender() {
    let config = fixture("zero-config.yaml");
    let r = check_file(
        "zero-recommender.yaml",
        &["--config", config.to_str().unwrap()],
    );
    assert_eq!(r.codes(), set(&["HB023"]), "{}", r.stdout);
    assert_eq!(r.code, 1, "{}", r.stdout);
    let f = &r.findings("HB023")[0];
    assert_eq!(f["severity"], "error");
    assert_eq!(f["field"], "spec.minReplicas");
    let m = f["message"].as_str().unwrap();
    assert!(
        m.contains("podSelector \"hpa-bridge.io/scrape=true\"")
            && m.contains("StatefulSet games/lobby"),
        "{m}"
    );
    // Without discovery the check cannot tell: a warning that says so.
    let r = check_file("zero-recommender.yaml", &[]);
    let f = &r.findings("HB023")[0];
    assert_eq!(f["severity"], "warning");
    assert!(f["message"]
        .as_str()
        .unwrap()
        .contains("no Kubernetes discovery"));

    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| write_file(dir.path(), name, text);
    // Discovery that does not scrape lobby's pods: the recommendation comes from elsewhere.
    let other = write(
        "other.yaml",
        "scrape:\n  kubernetes:\n    podSelector: app=recommender\n",
    );
    let r = check_file(
        "zero-recommender.yaml",
        &["--config", other.to_str().unwrap()],
    );
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
    // The HPA says the recommender runs outside the workload.
    let text = std::fs::read_to_string(fixture("zero-recommender.yaml")).unwrap();
    let annotate = |value: &str| {
        text.replacen(
            "metadata: {name: lobby, namespace: games}\nspec:\n  scaleTargetRef",
            &format!("metadata:\n  name: lobby\n  namespace: games\n  annotations: {{hpa-bridge.io/recommender: {value}}}\nspec:\n  scaleTargetRef"),
            1,
        )
    };
    let outside = write("outside.yaml", &annotate("outside-workload"));
    let r = check_with_config(&config, &outside);
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
    let typo = write("typo.yaml", &annotate("outside"));
    let r = check_with_config(&config, &typo);
    let m = r.findings("HB023")[0]["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        m.contains("is not \"outside-workload\", so it is ignored"),
        "{m}"
    );
    // minReplicas 1 needs no recommender at 0.
    let one = write(
        "one.yaml",
        &text.replace("minReplicas: 0", "minReplicas: 1"),
    );
    let r = check_with_config(&config, &one);
    assert_eq!(r.codes(), set(&[]), "{}", r.stdout);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_mode_finds_every_writer_of_a_workload() {
    let adapter = AdapterProcess::start("").await;
    let pki = Pki::new("fake-apiserver-ca");
    let server = FakeApiServer::start(
        &pki,
        "cluster-writers",
        "apiservice-keda.json",
        adapter.client(),
    )
    .await;
    let r = server.check_json(&pki).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    // Beside KEDA the HPAs read Object metrics, so the foreign APIService is only noted.
    assert_eq!(
        r.codes(),
        set(&["HB016", "HB020", "HB021", "HB022"]),
        "{}",
        r.stdout
    );
    assert_eq!(r.findings("HB020").len(), 2, "{}", r.stdout);
    let keda = r.findings("HB021");
    assert_eq!(keda.len(), 1, "{}", r.stdout);
    assert_eq!(keda[0]["object"]["name"], "worker");
    // The StatefulSet's last applied configuration fixes spec.replicas; the Deployment's
    // server-side apply manager does not own the field.
    let fixed = r.findings("HB022");
    assert_eq!(fixed.len(), 1, "{}", r.stdout);
    assert_eq!(fixed[0]["object"]["name"], "lobby");
    let m = fixed[0]["message"].as_str().unwrap();
    assert!(
        m.contains("last-applied-configuration sets spec.replicas: 3"),
        "{m}"
    );
    let reqs = server.requests();
    assert!(
        reqs.iter()
            .any(|p| p.starts_with("/apis/keda.sh/v1alpha1/scaledobjects")),
        "{reqs:#?}"
    );
    assert!(reqs
        .iter()
        .any(|p| p == "/apis/apps/v1/namespaces/jobs/deployments/worker"));
}

// ---- the role for --cluster --------------------------------------------------------------

/// What the API server's authorizer sees of a request, as k8s.io/apiserver's
/// `RequestInfoFactory` derives it from the path: API group, resource (`resource/subresource`),
/// object name, and verb (GET of a collection is `list`, of a named object `get`).
#[derive(Debug)]
struct Attributes {
    group: String,
    resource: String,
    name: Option<String>,
    verb: &'static str,
}

/// The attributes of a resource request; None for a non-resource URL (`/version`, ...).
fn attributes(method: &str, path_and_query: &str) -> Option<Attributes> {
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let rest = match rest {
        ["namespaces", _namespace, rest @ ..] if !rest.is_empty() => rest,
        rest => rest,
    };
    let (resource, name) = match rest {
        [] => return None,
        [resource] => (resource.to_string(), None),
        [resource, name] => (resource.to_string(), Some(name.to_string())),
        [resource, name, subresource, ..] => {
            (format!("{resource}/{subresource}"), Some(name.to_string()))
        }
    };
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match (method, &name) {
        ("GET", _) if watch => "watch",
        ("GET", Some(_)) => "get",
        ("GET", None) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => "other",
    };
    Some(Attributes {
        group: group.to_string(),
        resource,
        name,
        verb,
    })
}

/// One rule of a ClusterRole.
#[derive(Debug)]
struct Rule {
    groups: Vec<String>,
    resources: Vec<String>,
    names: Vec<String>,
    verbs: Vec<String>,
}

impl Rule {
    /// RBAC's match: each list holds the value or `*`; `resourceNames`, when set, the name.
    fn allows(&self, a: &Attributes) -> bool {
        let has = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
        has(&self.groups, &a.group)
            && has(&self.resources, &a.resource)
            && has(&self.verbs, a.verb)
            && (self.names.is_empty() || a.name.as_ref().is_some_and(|n| self.names.contains(n)))
    }
}

/// The rules of `hpa-bridge:check` in manifests/check/rbac.yaml.
fn check_role() -> Vec<Rule> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/check/rbac.yaml");
    let docs = common::kube_objects::docs(&std::fs::read_to_string(path).unwrap());
    let role = docs
        .iter()
        .find(|d| d["kind"] == "ClusterRole" && d["metadata"]["name"] == "hpa-bridge:check")
        .expect("ClusterRole hpa-bridge:check");
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    };
    role["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r.get("nonResourceURLs").is_none(), "{r}");
            Rule {
                groups: strings(&r["apiGroups"]),
                resources: strings(&r["resources"]),
                names: strings(&r["resourceNames"]),
                verbs: strings(&r["verbs"]),
            }
        })
        .collect()
}

/// The ClusterRole for `check --cluster` (manifests/check/rbac.yaml) allows every request the
/// check makes, and every grant in it is used by one, so it neither falls short nor grows
/// stale. The check runs against a cluster without KEDA whose APIService is the adapter's, so
/// the adapter's answers are asked for, and against one with KEDA and a Deployment target.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_check_role_allows_exactly_what_check_reads() {
    let adapter = AdapterProcess::start("").await;
    let pki = Pki::new("fake-apiserver-ca");
    let plain = FakeApiServer::start(&pki, "cluster", "apiservice.json", adapter.client()).await;
    let r = plain.check_json(&pki).await;
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    // Without KEDA's CRD the list answers 404: nothing to find, so nothing is said.
    assert!(
        plain
            .requests()
            .iter()
            .any(|p| p.split('?').next() == Some("/apis/keda.sh/v1alpha1/scaledobjects")),
        "{:#?}",
        plain.requests()
    );
    assert!(!r.stderr.contains("ScaledObject"), "{}", r.stderr);
    assert!(!r.codes().contains("HB021"), "{}", r.stdout);
    let writers = FakeApiServer::start(
        &pki,
        "cluster-writers",
        "apiservice-keda.json",
        adapter.client(),
    )
    .await;
    let w = writers.check_json(&pki).await;
    assert!(w.codes().contains("HB021"), "{}\n{}", w.stdout, w.stderr);

    let calls: Vec<(String, String)> = plain.calls().into_iter().chain(writers.calls()).collect();
    let seen: Vec<Attributes> = calls
        .iter()
        .map(|(method, path)| {
            attributes(method, path)
                .unwrap_or_else(|| panic!("{method} {path} is not a resource request"))
        })
        .collect();
    let rules = check_role();
    for (a, (method, path)) in seen.iter().zip(&calls) {
        assert!(
            rules.iter().any(|r| r.allows(a)),
            "{method} {path} ({a:?}) is not allowed by hpa-bridge:check: {rules:#?}"
        );
    }
    for rule in &rules {
        for verb in &rule.verbs {
            assert!(["get", "list"].contains(&verb.as_str()), "{rule:?}");
        }
        let names: Vec<Option<&String>> = match rule.names.as_slice() {
            [] => vec![None],
            names => names.iter().map(Some).collect(),
        };
        for group in &rule.groups {
            for resource in &rule.resources {
                for verb in &rule.verbs {
                    for name in &names {
                        let grant = Rule {
                            groups: vec![group.clone()],
                            resources: vec![resource.clone()],
                            names: name.map(|n| vec![n.clone()]).unwrap_or_default(),
                            verbs: vec![verb.clone()],
                        };
                        assert!(
                            seen.iter().any(|a| grant.allows(a)),
                            "{verb} {group}/{resource} {name:?} is granted but never used: {calls:#?}"
                        );
                    }
                }
            }
        }
    }

    // A role without the ScaledObject rule: listing them is forbidden, check warns that
    // HB021 went unchecked and finds the rest.
    writers.forbid("/apis/keda.sh/v1alpha1/scaledobjects");
    let f = writers.check_json(&pki).await;
    assert_eq!(f.code, 1, "{}\n{}", f.stdout, f.stderr);
    assert!(
        f.stderr
            .contains("HB021, an HPA beside a ScaledObject, is not checked"),
        "{}",
        f.stderr
    );
    assert_eq!(f.codes(), set(&["HB016", "HB020", "HB022"]), "{}", f.stdout);
}

/// A GitOps folder holds more than Kubernetes objects: a Helm values file, a promtool rules
/// test. `check -f DIR` walks it, notes each document it skips, and still reports the HB002
/// of the HPA in a subfolder.
#[test]
fn a_folder_of_mixed_yaml_is_checked_and_each_skip_noted() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        repo.join("manifests/monitoring/rules.test.yaml"),
        dir.path().join("rules.test.yaml"),
    )
    .unwrap();
    std::fs::write(dir.path().join("values.yaml"), "image: {repository: x}\n").unwrap();
    let apps = dir.path().join("apps");
    std::fs::create_dir(&apps).unwrap();
    std::fs::copy(fixture("average-value.yaml"), apps.join("hpa.yaml")).unwrap();
    let r = check(&["-o", "json", "-f", dir.path().to_str().unwrap()]);
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(r.codes().contains("HB002"), "{}", r.stdout);
    let skipped: Vec<String> = r.json()["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect();
    assert!(
        skipped.iter().any(|s| s.contains("rules.test.yaml"))
            && skipped.iter().any(|s| s.contains("values.yaml")),
        "{skipped:?}"
    );
    let table = check(&["-f", dir.path().to_str().unwrap()]);
    assert!(
        table.stdout.contains("skipped ") && table.stdout.contains("HB002"),
        "{}",
        table.stdout
    );
    // The repo's own manifests, examples included, are checked whole.
    let own = check(&["-f", repo.join("manifests").to_str().unwrap()]);
    assert_ne!(own.code, 2, "{}\n{}", own.stdout, own.stderr);
}
