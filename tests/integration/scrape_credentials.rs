//! Credentials are configured, never embedded: the real binary refuses a target URL that
//! carries a userinfo, sends `basicAuth` and `bearerTokenFile` read from their files to a real
//! loopback exporter that requires them, fails a scrape whose credentials the exporter refuses
//! with an error saying so, and never shows a secret on /status, /metrics, the page or its log.

use std::time::Duration;

use hpa_bridge_kit::exporter::TestExporter;

use crate::common::*;

/// The password holds `/` and `#`, which end a URL's authority.
const PASSWORD: &str = "s3cr/et#pw";
/// base64("scraper:s3cr/et#pw"), as RFC 7617 encodes it.
const BASIC: &str = "Basic c2NyYXBlcjpzM2NyL2V0I3B3";
const TOKEN: &str = "t0ken-Bearer-9f8e";
const LOBBY: &str = "hpa_target_name=lobby";

/// Every place the adapter shows or writes: none may hold a secret or a piece of one.
async fn assert_nothing_shows(adapter: &AdapterProcess, secrets: &[&str]) {
    let (_, status) = adapter.plain_get("/status").await;
    let (_, metrics) = adapter.plain_get("/metrics").await;
    let (_, page) = adapter.plain_get("/").await;
    let log = adapter.log();
    for (what, text) in [
        ("/status", &status),
        ("/metrics", &metrics),
        ("the page", &page),
        ("the log", &log),
    ] {
        for secret in secrets {
            assert!(!text.contains(secret), "{what} shows {secret:?}:\n{text}");
        }
    }
}

/// `serve` with `config` exits 1 at startup: its standard error.
fn refused_at_start(dir: &tempfile::TempDir, config: &str) -> String {
    let path = dir.path().join("config.yaml");
    std::fs::write(&path, config).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["serve", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{config}: {err}");
    err
}

#[test]
fn a_target_url_with_credentials_is_refused_at_startup_pointing_to_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    for url in [
        "http://scraper:s3cr/et#pw@127.0.0.1:9/metrics",
        "http://scraper:s3cret@127.0.0.1:9/metrics",
        "http://s3cret@127.0.0.1:9/metrics",
    ] {
        let err = refused_at_start(
            &dir,
            &format!(
                "scrape:\n  static:\n    - url: {url}\n      labels: {{namespace: default}}\n"
            ),
        );
        assert!(
            err.contains("scrape.static[0].url")
                && err.contains("basicAuth: {username, passwordFile}")
                && err.contains("bearerTokenFile"),
            "{url}: {err}"
        );
        for piece in ["s3cr", "et#pw"] {
            assert!(
                !err.contains(piece),
                "{url}: the refusal shows {piece:?}: {err}"
            );
        }
    }
    // A password written into the config is refused by name too.
    let err = refused_at_start(
        &dir,
        "scrape:\n  static:\n    - url: http://127.0.0.1:9/metrics\n      basicAuth: {username: scraper, password: s3cret}\n",
    );
    assert!(
        err.contains("scrape.static[0].basicAuth.password") && err.contains("passwordFile"),
        "{err}"
    );
    assert!(!err.contains("s3cret"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_and_a_bearer_token_are_read_from_their_files_sent_and_never_shown() {
    let ex = TestExporter::start().await;
    ex.page("/basic", expect_page("ctl-basic", "3"));
    ex.page("/bearer", expect_page("ctl-bearer", "5"));
    ex.require_authorization("/basic", BASIC);
    ex.require_authorization("/bearer", &format!("Bearer {TOKEN}"));
    let secrets = tempfile::tempdir().unwrap();
    let password_file = secrets.path().join("password");
    let token_file = secrets.path().join("token");
    // A trailing newline, as `kubectl create secret --from-file` often leaves, is trimmed.
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let config = format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n  static:\n\
         \x20   - url: {}\n      labels: {{namespace: default, pod: ctl-basic}}\n      basicAuth: {{username: scraper, passwordFile: {}}}\n\
         \x20   - url: {}\n      labels: {{namespace: default, pod: ctl-bearer}}\n      bearerTokenFile: {}\n",
        ex.url("/basic"),
        password_file.display(),
        ex.url("/bearer"),
        token_file.display(),
    );
    let adapter = AdapterProcess::start(&config).await;
    // Both exporters answered: 5 is the bearer target's, and the status shows both healthy.
    adapter
        .eventually_value("default", "hpa_expect_replicas", LOBBY, "5")
        .await;
    let status = adapter.status().await;
    for t in status["targets"].as_array().unwrap() {
        assert_eq!(t["healthy"], true, "{t}");
    }
    // The basic target's own value is read too: it is the floor of the max once the bearer
    // target's value drops below it.
    ex.page("/bearer", expect_page("ctl-bearer", "1"));
    adapter
        .eventually_value("default", "hpa_expect_replicas", LOBBY, "3")
        .await;
    assert_nothing_shows(
        &adapter,
        &[PASSWORD, "s3cr", TOKEN, "c2NyYXBlcjpzM2NyL2V0I3B3"],
    )
    .await;

    // A rotated secret is used from the next scrape on: the exporter now wants another token,
    // the old one fails with an error that says whose credentials were refused, and the new
    // file's content makes the target healthy again.
    ex.require_authorization("/bearer", "Bearer rotated-7c1d");
    let refused = eventually_target_error(&adapter, "ctl-bearer").await;
    assert_eq!(
        refused,
        "HTTP status 401: the exporter refused this target's bearerTokenFile token"
    );
    std::fs::write(&token_file, "rotated-7c1d").unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while target_error(&adapter, "ctl-bearer").await.is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "the rotated token was not used"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A wrong password fails with its own error; a missing file names the key and the path.
    std::fs::write(&password_file, "wrong").unwrap();
    assert_eq!(
        eventually_target_error(&adapter, "ctl-basic").await,
        "HTTP status 401: the exporter refused this target's basicAuth"
    );
    std::fs::remove_file(&password_file).unwrap();
    let missing = loop {
        let e = eventually_target_error(&adapter, "ctl-basic").await;
        if e.starts_with("reading") {
            break e;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        missing.starts_with(&format!(
            "reading scrape.static[0].basicAuth.passwordFile {}: ",
            password_file.display()
        )),
        "{missing}"
    );
    let (_, metrics) = adapter.plain_get("/metrics").await;
    assert!(metrics.contains("reason=\"credentials\""), "{metrics}");
    assert_nothing_shows(&adapter, &[PASSWORD, "s3cr", TOKEN, "rotated-7c1d"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exporter_that_wants_credentials_says_so_when_none_are_configured() {
    let ex = TestExporter::start().await;
    ex.page("/m", expect_page("ctl-0", "3"));
    ex.require_authorization("/m", BASIC);
    let adapter = AdapterProcess::start(&fast_config(&[(ex.url("/m"), "default", "ctl-0")])).await;
    assert_eq!(
        eventually_target_error(&adapter, "ctl-0").await,
        "HTTP status 401: the exporter wants credentials: set basicAuth or bearerTokenFile on this target"
    );
}

/// The last error of the target whose `pod` label is `pod`, `None` while it is healthy.
async fn target_error(adapter: &AdapterProcess, pod: &str) -> Option<String> {
    let status = adapter.status().await;
    let target = status["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["labels"]["pod"] == pod)
        .unwrap_or_else(|| panic!("no target {pod}: {status}"))
        .clone();
    target["lastError"].as_str().map(str::to_owned)
}

async fn eventually_target_error(adapter: &AdapterProcess, pod: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(e) = target_error(adapter, pod).await {
            return e;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "target {pod} never failed"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
