//! The Prometheus query source against a REAL Prometheus (Debian `prometheus`, started here as a
//! subprocess with a generated config) scraping real loopback exporters.
//!
//! The same scenarios run against both sources — the adapter scraping the exporters itself,
//! and the adapter querying a Prometheus that scrapes the same exporters — and every answer
//! must be identical (HTTP code, value, refusal kind).
//!
//! Without the binary the tests are skipped with a loud message, unless `CI` is set: in CI a
//! missing Prometheus is a failure.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::*;

fn find_prometheus() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("prometheus"))
        .find(|p| p.is_file())
}

/// The binary, or `None` (skip) outside CI.
fn require_prometheus() -> Option<PathBuf> {
    if let Some(p) = find_prometheus() {
        return Some(p);
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(
        !ci,
        "the prometheus binary is required in CI (apt-get install -y prometheus)"
    );
    eprintln!(
        "\n\n************************************************************************\n\
         SKIPPING the Prometheus source tests: no `prometheus` binary on PATH.\n\
         Install it with `apt-get install -y prometheus` (CI does; there it fails).\n\
         ************************************************************************\n"
    );
    None
}

/// A real Prometheus server on loopback with its own config and data directory.
struct PrometheusProcess {
    binary: PathBuf,
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    /// Serve HTTPS with this certificate (Prometheus `--web.config.file`), trusting this CA.
    tls: Option<(PathBuf, PathBuf, rustls::pki_types::CertificateDer<'static>)>,
}

/// One scrape target: an exporter URL path and the pod name it stands for.
struct Target<'a> {
    exporter: &'a TestExporter,
    path: &'a str,
    pod: &'a str,
}

impl PrometheusProcess {
    async fn start(binary: PathBuf, targets: &[Target<'_>]) -> Self {
        Self::start_with_tls(binary, targets, None).await
    }

    async fn start_with_tls(
        binary: PathBuf,
        targets: &[Target<'_>],
        tls: Option<(PathBuf, PathBuf, rustls::pki_types::CertificateDer<'static>)>,
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut config = String::from(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: exporters\n    static_configs:\n",
        );
        for t in targets {
            // Per-target path and identity: the same labels the scrape source attaches.
            config.push_str(&format!(
                "      - targets: ['{}']\n        labels: {{__metrics_path__: '{}', namespace: default, pod: {}, instance: {}}}\n",
                t.exporter.addr, t.path, t.pod, t.pod
            ));
        }
        std::fs::write(dir.path().join("prometheus.yml"), config).unwrap();
        if let Some((cert, key, _)) = &tls {
            std::fs::write(
                dir.path().join("web.yml"),
                format!(
                    "tls_server_config:\n  cert_file: {}\n  key_file: {}\n",
                    cert.display(),
                    key.display()
                ),
            )
            .unwrap();
        }
        let mut p = PrometheusProcess {
            binary,
            child: None,
            port: free_port(),
            dir,
            tls,
        };
        p.spawn().await;
        p
    }

    fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    async fn ready(&self) -> bool {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        if tokio::net::TcpStream::connect(addr).await.is_err() {
            return false;
        }
        match &self.tls {
            Some((_, _, ca)) => matches!(
                HttpsClient::new(self.port, std::slice::from_ref(ca), None)
                    .get("/-/ready", &[])
                    .await,
                Ok((200, _))
            ),
            None => plain_http_get(addr, "/-/ready").await.0 == 200,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("prometheus.log")).unwrap_or_default()
    }

    /// Start (or restart) on the same port and data directory.
    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.path().join("prometheus.log"))
            .unwrap();
        let mut cmd = Command::new(&self.binary);
        if self.tls.is_some() {
            cmd.arg(format!(
                "--web.config.file={}",
                self.dir.path().join("web.yml").display()
            ));
        }
        let child = cmd
            .arg(format!(
                "--config.file={}",
                self.dir.path().join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                self.dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{}", self.port))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn prometheus");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if self.ready().await {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "prometheus did not become ready; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    async fn version(&self) -> String {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], self.port));
        let (_, body) = plain_http_get(addr, "/api/v1/status/buildinfo").await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["data"]["version"].as_str().unwrap_or("?").to_string()
    }
}

impl Drop for PrometheusProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

fn expect_series(workload: &str, instance: &str, value: &str) -> String {
    format!(
        "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"{workload}\",service_instance_id=\"{instance}\"}} {value}\n"
    )
}

fn index_series(workload: &str, pod: &str, value: &str) -> String {
    format!(
        "# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"{workload}\",service_instance_id=\"{pod}\"}} {value}\n"
    )
}

fn prom_config(url: &str, cache_ttl: &str) -> String {
    format!(
        "scrape:\n  interval: 1s\n  timeout: 1s\n  staleAfter: 3s\nsource:\n  prometheus:\n    url: {url}\n    timeout: 2s\n    cacheTtl: {cache_ttl}\n    retainFor: 10m\n"
    )
}

fn scrape_config(targets: &[Target<'_>]) -> String {
    let list: Vec<(String, &str, &str)> = targets
        .iter()
        .map(|t| (t.exporter.url(t.path), "default", t.pod))
        .collect();
    format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 3s\n{}",
        static_targets(&list)
    )
}

/// What an answer amounts to, for comparing the two sources.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Value(String),
    /// HTTP code and the refusal verb (`is stale`, `is partial`, `has no data`...).
    Refused(u16, String),
}

fn seen(metric: &str, code: u16, v: &serde_json::Value) -> Seen {
    if code == 200 {
        return Seen::Value(single_value(v).unwrap_or_default());
    }
    let message = v["message"].as_str().unwrap_or_default();
    let verb = message
        .strip_prefix(metric)
        .and_then(|m| m.split(':').next())
        .unwrap_or(message)
        .trim()
        .to_string();
    Seen::Refused(code, verb)
}

fn value(v: &str) -> Seen {
    Seen::Value(v.into())
}

fn refused(code: u16, verb: &str) -> Seen {
    Seen::Refused(code, verb.into())
}

/// Both adapters reach the expected answer. Each is polled until it does (the sources see a
/// change at different moments), then both are asked once more and must agree.
async fn both(adapters: &[(&str, &AdapterProcess)], metric: &str, selector: &str, want: Seen) {
    for (name, a) in adapters {
        let what = format!("{name}: {metric} {selector} = {want:?}");
        a.eventually("default", metric, selector, &what, |code, v| {
            seen(metric, code, v) == want
        })
        .await;
    }
    let mut answers = Vec::new();
    for (name, a) in adapters {
        let (code, v) = a.metric("default", metric, selector).await;
        answers.push((name, seen(metric, code, &v), v));
    }
    for (name, s, v) in &answers {
        assert_eq!(s, &want, "{name} moved away from the expected answer: {v}");
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn both_sources_give_identical_answers() {
    let Some(binary) = require_prometheus() else {
        return;
    };
    let exp = TestExporter::start().await;
    let vanishing = TestExporter::start().await;

    exp.page("/dup/c1", expect_series("dup", "c1", "3"));
    exp.page("/dup/c2", expect_series("dup", "c2", "5"));
    exp.page("/floor/c1", expect_series("floor", "c1", "2"));
    exp.page("/floor/p0", index_series("floor", "floor-0", "1"));
    // Not Ready: the index is 0 (REFERENCE.md §4.1).
    exp.page("/floor/p1", index_series("floor", "floor-1", "0"));
    exp.page("/floor/p2", index_series("floor", "floor-2", "3"));
    exp.page("/stale/c1", expect_series("stale", "c1", "3"));
    exp.page("/stale/c2", expect_series("stale", "c2", "5"));
    vanishing.page("/gone/c1", expect_series("gone", "c1", "7"));
    exp.page("/gone/c2", expect_series("gone", "c2", "4"));
    // A pushed value with its own timestamp, a minute old and never updated: what a
    // Pushgateway scraped with honor_timestamps looks like.
    exp.page(
        "/pushed/c1",
        format!(
            "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{hpa_target_name=\"pushed\",service_instance_id=\"c1\"}} 6 {}\n",
            now_ms() - 60_000
        ),
    );
    exp.page(
        "/hostile/c1",
        expect_series("lobXy", "c1", "9")
            + &expect_series("otherr", "c1", "1").replace("# TYPE hpa_expect_replicas gauge\n", ""),
    );

    let targets = [
        Target {
            exporter: &exp,
            path: "/dup/c1",
            pod: "dup-c1",
        },
        Target {
            exporter: &exp,
            path: "/dup/c2",
            pod: "dup-c2",
        },
        Target {
            exporter: &exp,
            path: "/floor/c1",
            pod: "floor-c1",
        },
        Target {
            exporter: &exp,
            path: "/floor/p0",
            pod: "floor-0",
        },
        Target {
            exporter: &exp,
            path: "/floor/p1",
            pod: "floor-1",
        },
        Target {
            exporter: &exp,
            path: "/floor/p2",
            pod: "floor-2",
        },
        Target {
            exporter: &exp,
            path: "/stale/c1",
            pod: "stale-c1",
        },
        Target {
            exporter: &exp,
            path: "/stale/c2",
            pod: "stale-c2",
        },
        Target {
            exporter: &vanishing,
            path: "/gone/c1",
            pod: "gone-c1",
        },
        Target {
            exporter: &exp,
            path: "/gone/c2",
            pod: "gone-c2",
        },
        Target {
            exporter: &exp,
            path: "/pushed/c1",
            pod: "pushed-c1",
        },
        Target {
            exporter: &exp,
            path: "/hostile/c1",
            pod: "hostile-c1",
        },
    ];
    let prom = PrometheusProcess::start(binary, &targets).await;
    eprintln!("Prometheus version {}", prom.version().await);
    let scrape = AdapterProcess::start(&scrape_config(&targets)).await;
    let via_prom = AdapterProcess::start(&prom_config(&prom.url(), "200ms")).await;
    let adapters = [("scrape source", &scrape), ("prometheus source", &via_prom)];
    let rec = "hpa_expect_replicas";

    // Duplicate controllers: the max, never the sum (REFERENCE.md §4.1, §1.2).
    both(&adapters, rec, "hpa_target_name=dup", value("5")).await;

    // The floor over pods, one of them not Ready; then the highest pod goes not Ready and the
    // floor follows its newest index (a max over time would hold 3 for retainFor).
    both(
        &adapters,
        "hpa_stateful_floor",
        "hpa_target_name=floor",
        value("3"),
    )
    .await;
    both(
        &adapters,
        "hpa_target_replicas",
        "hpa_target_name=floor",
        value("3"),
    )
    .await;
    exp.page("/floor/p2", index_series("floor", "floor-2", "0"));
    both(
        &adapters,
        "hpa_stateful_floor",
        "hpa_target_name=floor",
        value("1"),
    )
    .await;
    both(
        &adapters,
        "hpa_target_replicas",
        "hpa_target_name=floor",
        value("2"),
    )
    .await;

    // A failing exporter (HTTP 500; Prometheus writes staleness markers) that held the max:
    // partial, not the lower fresh value.
    both(&adapters, rec, "hpa_target_name=stale", value("5")).await;
    exp.set(
        "/stale/c2",
        Behaviour {
            body: "boom".into(),
            status: 500,
            delay: Duration::ZERO,
        },
    );
    both(
        &adapters,
        rec,
        "hpa_target_name=stale",
        refused(503, "is partial"),
    )
    .await;
    // Once the fresh max exceeds the stale series' last value, it is served.
    exp.page("/stale/c1", expect_series("stale", "c1", "6"));
    both(&adapters, rec, "hpa_target_name=stale", value("6")).await;
    exp.set(
        "/stale/c1",
        Behaviour {
            body: "boom".into(),
            status: 500,
            delay: Duration::ZERO,
        },
    );
    both(
        &adapters,
        rec,
        "hpa_target_name=stale",
        refused(503, "is stale"),
    )
    .await;

    // An exporter that disappears (connection refused) while holding the max.
    both(&adapters, rec, "hpa_target_name=gone", value("7")).await;
    vanishing.stop();
    both(
        &adapters,
        rec,
        "hpa_target_name=gone",
        refused(503, "is partial"),
    )
    .await;

    // Pushed with an old timestamp: stale by its own timestamp, although Prometheus still
    // returns it for an instant query (5 minute lookback, no staleness markers).
    both(
        &adapters,
        rec,
        "hpa_target_name=pushed",
        refused(503, "is stale"),
    )
    .await;

    // `.` is a regex metacharacter and legal inside label values: matched literally, `lob.y`
    // must not match `lobXy` (nor `othe.r` match `otherr`), in a single-value and a
    // multi-value (alternation) `in`. A naive regex would serve 9.
    both(&adapters, rec, "hpa_target_name in (lobXy)", value("9")).await;
    both(
        &adapters,
        rec,
        "hpa_target_name in (lob.y)",
        refused(404, "has no data"),
    )
    .await;
    both(
        &adapters,
        rec,
        "hpa_target_name in (lob.y,othe.r)",
        refused(404, "has no data"),
    )
    .await;
    both(
        &adapters,
        rec,
        "hpa_target_name in (lobXy,othe.r)",
        value("9"),
    )
    .await;
    // A key that cannot be a Prometheus label: `=` matches nothing, `!=` everything.
    both(
        &adapters,
        rec,
        "hpa_target_name=lobXy,app.kubernetes.io/name=x",
        refused(404, "has no data"),
    )
    .await;
    both(
        &adapters,
        rec,
        "hpa_target_name=lobXy,app.kubernetes.io/name!=x",
        value("9"),
    )
    .await;

    let status = via_prom.status().await;
    assert_eq!(status["source"]["kind"], "prometheus", "{status}");
    assert_eq!(status["source"]["healthy"], true, "{status}");
}

fn queries_sent(metrics: &str) -> u64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("hpa_bridge_prometheus_queries_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outage_is_a_clear_503_and_recovers_and_identical_requests_coalesce() {
    let Some(binary) = require_prometheus() else {
        return;
    };
    let exp = TestExporter::start().await;
    exp.page("/c1", expect_series("lobby", "c1", "4"));
    let targets = [Target {
        exporter: &exp,
        path: "/c1",
        pod: "lobby-c1",
    }];
    let mut prom = PrometheusProcess::start(binary, &targets).await;
    let adapter = AdapterProcess::start(&prom_config(&prom.url(), "200ms")).await;
    let rec = "hpa_expect_replicas";
    let sel = "hpa_target_name=lobby";
    adapter
        .eventually("default", rec, sel, "value 4", |code, v| {
            code == 200 && single_value(v).as_deref() == Some("4")
        })
        .await;

    // Prometheus goes away: a 503 Status naming Prometheus, never an empty list or 0.
    prom.stop();
    let v = adapter
        .eventually("default", rec, sel, "503 from the outage", |code, _| {
            code == 503
        })
        .await;
    let message = v["message"].as_str().unwrap();
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["reason"], "ServiceUnavailable", "{v}");
    assert!(
        message.contains("Prometheus source unavailable") && message.contains(&prom.url()),
        "{message}"
    );
    assert!(
        message.contains("connection refused") || message.contains("Connection refused"),
        "{message}"
    );
    let status = adapter.status().await;
    assert_eq!(status["source"]["healthy"], false, "{status}");
    assert!(status["source"]["lastError"].as_str().is_some(), "{status}");
    let (_, metrics) = adapter.plain_get("/metrics").await;
    assert!(
        metrics.contains("hpa_bridge_prometheus_queries_total{outcome=\"connect\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("hpa_bridge_prometheus_up 0"), "{metrics}");

    // Back on the same port and data directory: answers recover without a restart.
    prom.spawn().await;
    adapter
        .eventually("default", rec, sel, "value 4 after recovery", |code, v| {
            code == 200 && single_value(v).as_deref() == Some("4")
        })
        .await;
    assert_eq!(adapter.status().await["source"]["healthy"], true);

    // Coalescing: a second adapter whose cache outlives the test, so every request after the
    // first finds the query in flight or cached. One answer needs exactly two PromQL queries
    // (raw samples for freshness, and the retained/gone vector), sent together on a miss.
    let cached = AdapterProcess::start(&prom_config(&prom.url(), "10m")).await;
    let (_, before) = cached.plain_get("/metrics").await;
    let mut requests = Vec::new();
    for _ in 0..100 {
        let c = &cached;
        requests.push(async move { c.metric("default", rec, sel).await });
    }
    let answers = futures::future::join_all(requests).await;
    for (code, v) in &answers {
        assert_eq!(*code, 200, "{v}");
        assert_eq!(single_value(v).as_deref(), Some("4"));
    }
    let (_, after) = cached.plain_get("/metrics").await;
    let sent = queries_sent(&after) - queries_sent(&before);
    let hits = counter(&after, "hpa_bridge_prometheus_query_cache_hits_total")
        - counter(&before, "hpa_bridge_prometheus_query_cache_hits_total");
    eprintln!("100 concurrent identical requests: {sent} PromQL queries sent, {hits} served by the cache or an identical query in flight");
    assert!(sent <= 2, "{sent} queries for 100 identical requests");
    assert_eq!(
        hits, 99,
        "every request but the first shares the first one's queries"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn https_prometheus_needs_its_ca_or_an_explicit_skip() {
    let Some(binary) = require_prometheus() else {
        return;
    };
    let exp = TestExporter::start().await;
    exp.page("/c1", expect_series("lobby", "c1", "4"));
    let pki = Pki::new("prometheus-ca");
    let cert = pki.server();
    let targets = [Target {
        exporter: &exp,
        path: "/c1",
        pod: "lobby-c1",
    }];
    let prom = PrometheusProcess::start_with_tls(
        binary,
        &targets,
        Some((cert.cert_path.clone(), cert.key_path.clone(), pki.ca_der())),
    )
    .await;
    let rec = "hpa_expect_replicas";
    let sel = "hpa_target_name=lobby";
    let base = prom_config(&prom.url(), "200ms");
    let with_ca = AdapterProcess::start(&format!(
        "{base}    tls:\n      caFile: {}\n",
        pki.ca_path().display()
    ))
    .await;
    let skip =
        AdapterProcess::start(&format!("{base}    tls:\n      insecureSkipVerify: true\n")).await;
    let system_roots = AdapterProcess::start(&base).await;
    for a in [&with_ca, &skip] {
        a.eventually("default", rec, sel, "value 4 over https", |code, v| {
            code == 200 && single_value(v).as_deref() == Some("4")
        })
        .await;
    }
    // The system roots do not know the test CA: a certificate error, never a value.
    let (code, v) = system_roots.metric("default", rec, sel).await;
    assert_eq!(code, 503, "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(
        message.contains("Prometheus source unavailable") && message.contains("certificate"),
        "{message}"
    );
}
