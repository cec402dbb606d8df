//! Shared test harness: real exporters on loopback, real certificates generated per test,
//! the real `hpa-bridge` binary as a subprocess, and a real HTTPS client.

pub mod control_plane;
pub mod kube_objects;
pub mod peers;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;

/// `hpa_expect_replicas` for workload `lobby`, as one controller instance exports it.
pub fn expect_page(instance: &str, value: &str) -> String {
    format!(
        "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",service_instance_id=\"{instance}\"}} {value}\n"
    )
}

/// `hpa_stateful_index` for workload `lobby`, as one pod exports it.
pub fn index_page(pod: &str, value: &str) -> String {
    format!(
        "# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"lobby\",service_instance_id=\"{pod}\"}} {value}\n"
    )
}

/// A certificate authority and certificates it signs, generated per test.
/// The `/status` target with id `id`.
pub fn status_target<'a>(status: &'a serde_json::Value, id: &str) -> Option<&'a serde_json::Value> {
    status["targets"].as_array()?.iter().find(|t| t["id"] == id)
}

/// The `/status` row of `metric` for `selector`.
pub fn status_row<'a>(
    status: &'a serde_json::Value,
    metric: &str,
    selector: &str,
) -> &'a serde_json::Value {
    status["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["metric"] == metric && w["selector"] == selector)
        .unwrap_or_else(|| panic!("{status}"))
}

/// `hpa_stateful_index` of pod `pod` of the StatefulSet `workload`.
pub fn index_of(workload: &str, pod: &str, value: u64) -> String {
    format!(
        "# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{hpa_target_kind=\"StatefulSet\",hpa_target_name=\"{workload}\",service_instance_id=\"{pod}\"}} {value}\n"
    )
}

/// `hpa_expect_replicas` for `workload`, with no kind or instance.
pub fn expect_of(workload: &str, value: u64) -> String {
    format!(
        "# TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{hpa_target_name=\"{workload}\"}} {value}\n"
    )
}

/// A certificate authority (the kit's `Authority`) whose CA and leaves are also written to a
/// directory of its own, for the flags and kubeconfigs that take files.
pub struct Pki {
    pub dir: tempfile::TempDir,
    pub authority: hpa_bridge_kit::authority::Authority,
}

pub struct Issued {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
}

impl Issued {
    pub fn certs(&self) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(self.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap()
    }

    pub fn key(&self) -> PrivateKeyDer<'static> {
        PrivateKeyDer::from_pem_slice(self.key_pem.as_bytes()).unwrap()
    }
}

impl Pki {
    pub fn new(name: &str) -> Self {
        let authority = hpa_bridge_kit::authority::Authority::new(name).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.crt"), authority.pem()).unwrap();
        Pki { dir, authority }
    }

    pub fn ca_path(&self) -> PathBuf {
        self.dir.path().join("ca.crt")
    }

    pub fn ca_der(&self) -> CertificateDer<'static> {
        self.authority.der()
    }

    /// An anonymous TLS client that trusts this CA, offering `alpn` (none: the server picks
    /// HTTP/1.1).
    pub fn connector(&self, alpn: &[&[u8]]) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der()).unwrap();
        let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }

    /// `leaf`, written to `{file}.crt` and `{file}.key` in the directory.
    pub fn write(&self, file: &str, leaf: hpa_bridge_kit::authority::Leaf) -> Issued {
        let cert_path = self.dir.path().join(format!("{file}.crt"));
        let key_path = self.dir.path().join(format!("{file}.key"));
        std::fs::write(&cert_path, &leaf.cert_pem).unwrap();
        std::fs::write(&key_path, &leaf.key_pem).unwrap();
        Issued {
            cert_pem: leaf.cert_pem,
            key_pem: leaf.key_pem,
            cert_path,
            key_path,
        }
    }

    /// A serving certificate for 127.0.0.1, localhost, and the name the aggregator verifies
    /// for the install's Service (`hpa-bridge.hpa-bridge.svc`).
    pub fn server(&self) -> Issued {
        let names = ["localhost", "127.0.0.1", "hpa-bridge.hpa-bridge.svc"];
        self.write("server", self.authority.server(&names).unwrap())
    }

    /// A client certificate with CN and O (groups).
    pub fn client(&self, file: &str, cn: &str, orgs: &[&str]) -> Issued {
        self.write(file, self.authority.client(cn, orgs).unwrap())
    }
}

/// A port that was free a moment ago: the kernel picks it from the ephemeral range
/// (net.ipv4.ip_local_port_range, 32768-60999 by default), so it never collides with a
/// service's well-known port such as a local Prometheus on 9090. Whoever binds it checks that
/// its own process is the one answering.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real binary, started with a config file and the given extra flags.
pub struct AdapterProcess {
    pub child: Child,
    pub port: u16,
    pub metrics_port: u16,
    pub pki: Pki,
    pub dir: tempfile::TempDir,
    pub log_path: PathBuf,
}

impl AdapterProcess {
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.yaml")
    }

    pub async fn start(config: &str) -> Self {
        Self::start_with(config, &[]).await
    }

    pub async fn start_with(config: &str, extra: &[&str]) -> Self {
        Self::start_with_env(config, extra, &[]).await
    }

    /// `start_with`, with environment variables for the process (`RUST_LOG`, ...).
    pub async fn start_with_env(config: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        // `free_port` releases the port before the adapter binds it, so a test running beside
        // this one may take it meanwhile: start again on new ports, not fail.
        for _ in 0..5 {
            let mut p = Self::spawn_env(config, extra, env);
            match p.ready().await {
                Ok(()) => return p,
                Err(log) if log.contains("Address already in use") => continue,
                Err(log) => panic!("adapter exited before it was ready; log:\n{log}"),
            }
        }
        panic!("the adapter found its ports taken in 5 attempts")
    }

    pub fn spawn(config: &str, extra: &[&str]) -> Self {
        Self::spawn_env(config, extra, &[])
    }

    pub fn spawn_env(config: &str, extra: &[&str], env: &[(&str, &str)]) -> Self {
        let pki = Pki::new("test-serving-ca");
        let server = pki.server();
        let dir = tempfile::tempdir().unwrap();
        let config_path = dir.path().join("config.yaml");
        std::fs::write(&config_path, config).unwrap();
        let port = free_port();
        let metrics_port = free_port();
        let log_path = dir.path().join("adapter.log");
        let log = std::fs::File::create(&log_path).unwrap();
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hpa-bridge"));
        cmd.arg("serve")
            .arg("--config")
            .arg(&config_path)
            .arg("--secure-port")
            .arg(port.to_string())
            .arg("--metrics-bind-address")
            .arg(format!("127.0.0.1:{metrics_port}"))
            .arg("--tls-cert-file")
            .arg(&server.cert_path)
            .arg("--tls-private-key-file")
            .arg(&server.key_path)
            .args(extra)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log);
        let child = cmd.spawn().expect("spawn hpa-bridge");
        AdapterProcess {
            child,
            port,
            metrics_port,
            pki,
            dir,
            log_path,
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// Wait until `/readyz` answers 200; the log if the adapter exited first.
    async fn ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            // An adapter that exited (say, its port was taken between `free_port` and its bind)
            // must not be mistaken for whatever else answers on that port.
            if let Ok(Some(exit)) = self.child.try_wait() {
                return Err(format!("({exit})\n{}", self.log()));
            }
            if let Ok((200, _)) = self.get_anonymous("/readyz").await {
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "adapter did not become ready; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub fn client(&self) -> HttpsClient {
        HttpsClient::new(self.port, &[self.pki.ca_der()], None)
    }

    /// A client of the API port presenting `issued`'s certificate.
    pub fn client_as(&self, issued: &Issued) -> HttpsClient {
        HttpsClient::new(
            self.port,
            &[self.pki.ca_der()],
            Some((&issued.cert_path, &issued.key_path)),
        )
    }

    pub async fn get_anonymous(&self, path: &str) -> Result<(u16, String), String> {
        self.client().get(path, &[]).await
    }

    /// GET on the API, parsed as JSON.
    pub async fn get_json(&self, path: &str) -> (u16, serde_json::Value) {
        let (code, body) = self.client().get(path, &[]).await.unwrap();
        let v = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("non-JSON body for {path} ({code}): {e}: {body}"));
        (code, v)
    }

    pub async fn metric(&self, ns: &str, metric: &str, selector: &str) -> (u16, serde_json::Value) {
        let mut path = format!("/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}");
        if !selector.is_empty() {
            path.push_str("?labelSelector=");
            path.push_str(
                &percent_encoding::utf8_percent_encode(
                    selector,
                    percent_encoding::NON_ALPHANUMERIC,
                )
                .to_string(),
            );
        }
        self.get_json(&path).await
    }

    /// Poll until `check` accepts the answer, or fail with the last one.
    pub async fn eventually<F>(
        &self,
        ns: &str,
        metric: &str,
        selector: &str,
        what: &str,
        check: F,
    ) -> serde_json::Value
    where
        F: Fn(u16, &serde_json::Value) -> bool,
    {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let (code, v) = self.metric(ns, metric, selector).await;
            if check(code, &v) {
                return v;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}: last answer {code} {v}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Poll until the metric is served as exactly one item with `value`.
    pub async fn eventually_value(
        &self,
        ns: &str,
        metric: &str,
        selector: &str,
        value: &str,
    ) -> serde_json::Value {
        self.eventually(ns, metric, selector, value, |c, v| {
            c == 200 && single_value(v).as_deref() == Some(value)
        })
        .await
    }

    pub async fn plain_get(&self, path: &str) -> (u16, String) {
        plain_http_get(SocketAddr::from(([127, 0, 0, 1], self.metrics_port)), path).await
    }

    pub async fn status(&self) -> serde_json::Value {
        let (code, body) = self.plain_get("/status").await;
        assert_eq!(code, 200);
        serde_json::from_str(&body).unwrap()
    }
}

impl Drop for AdapterProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The single item's value, if the answer is a one-item list.
pub fn single_value(v: &serde_json::Value) -> Option<String> {
    let items = v["items"].as_array()?;
    assert_eq!(items.len(), 1, "exactly one item expected: {v}");
    items[0]["value"].as_str().map(String::from)
}

pub async fn plain_http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header("host", addr.to_string())
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8_lossy(&body).into_owned())
}

/// A real HTTPS client (rustls) with an optional client certificate.
#[derive(Clone)]
pub struct HttpsClient {
    port: u16,
    config: Arc<rustls::ClientConfig>,
}

impl HttpsClient {
    pub fn new(
        port: u16,
        roots: &[CertificateDer<'static>],
        client: Option<(&Path, &Path)>,
    ) -> Self {
        let mut store = rustls::RootCertStore::empty();
        for r in roots {
            store.add(r.clone()).unwrap();
        }
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store);
        let config = match client {
            Some((cert, key)) => {
                let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                let key = PrivateKeyDer::from_pem_file(key).unwrap();
                builder.with_client_auth_cert(certs, key).unwrap()
            }
            None => builder.with_no_client_auth(),
        };
        HttpsClient {
            port,
            config: Arc::new(config),
        }
    }

    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Result<(u16, String), String> {
        let tcp = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .map_err(|e| e.to_string())?;
        let connector = tokio_rustls::TlsConnector::from(self.config.clone());
        let tls = connector
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .map_err(|e| e.to_string())?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        let mut req = http::Request::get(path).header("host", format!("127.0.0.1:{}", self.port));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = sender
            .send_request(req.body(http_body_util::Empty::<Bytes>::new()).unwrap())
            .await
            .map_err(|e| e.to_string())?;
        let code = resp.status().as_u16();
        let ct = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap_or("").to_string());
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        if path.starts_with("/apis") {
            assert_eq!(
                ct.as_deref(),
                Some("application/json"),
                "content type for {path}"
            );
        }
        Ok((code, String::from_utf8_lossy(&body).into_owned()))
    }
}

/// Deletion-cost election timings short enough for a test (kube-controller-manager's are 15 s,
/// 10 s and 2 s): lease duration, renew deadline, retry period.
pub const SHORT_ELECTION: [&str; 6] = [
    "--deletion-cost-lease-duration",
    "2s",
    "--deletion-cost-renew-deadline",
    "1500ms",
    "--deletion-cost-retry-period",
    "200ms",
];

/// Static targets for `config`: (url, namespace, pod).
pub fn static_targets(targets: &[(String, &str, &str)]) -> String {
    let mut s = String::from("  static:\n");
    for (url, ns, pod) in targets {
        s.push_str(&format!(
            "    - url: {url}\n      labels: {{namespace: {ns}, pod: {pod}}}\n"
        ));
    }
    s
}

/// A fast-scraping config over the given targets, with the default metrics.
pub fn fast_config(targets: &[(String, &str, &str)]) -> String {
    format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n{}",
        static_targets(targets)
    )
}

/// A TCP connection to `to` from the loopback address `source` (127.0.0.0/8 holds many, so a
/// test can be several clients; IPv6 has only ::1).
pub async fn try_connect_from(
    source: std::net::IpAddr,
    to: std::net::SocketAddr,
) -> std::io::Result<tokio::net::TcpStream> {
    let socket = match source {
        std::net::IpAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
        std::net::IpAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
    }
    .unwrap();
    socket.bind(std::net::SocketAddr::new(source, 0)).unwrap();
    socket.connect(to).await
}
