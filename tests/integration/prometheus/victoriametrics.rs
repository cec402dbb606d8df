//! Debian's `victoria-metrics` (single node) on loopback, started by the test: it scrapes with
//! its own `-promscrape.config` (a file the test writes), keeps its data in a temporary
//! `-storageDataPath` and listens on a free port; every other flag is the default. Only the
//! process started here is ever stopped (on drop).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, plain_http_get};

pub struct VictoriaMetricsProcess {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
    version: String,
}

impl VictoriaMetricsProcess {
    /// Starts `binary` scraping what `scrape_config` (Prometheus `scrape_configs` YAML) names,
    /// and waits until it answers `/-/ready`.
    pub async fn start(binary: PathBuf, scrape_config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("scrape.yml");
        std::fs::write(&config, scrape_config).unwrap();
        let port = free_port();
        let child = spawn(&binary, dir.path(), &config, port);
        let mut vm = VictoriaMetricsProcess {
            child,
            port,
            dir,
            version: String::new(),
        };
        vm.wait_ready().await;
        vm.version = vm.read_version().await;
        vm
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("victoria-metrics.log")).unwrap_or_default()
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Our own instance, not another server that took the port: fail if it has exited.
            if let Ok(Some(exit)) = self.child.try_wait() {
                panic!(
                    "victoria-metrics exited before it was ready ({exit}); log:\n{}",
                    self.log()
                );
            }
            if tokio::net::TcpStream::connect(self.addr()).await.is_ok()
                && plain_http_get(self.addr(), "/-/ready").await.0 == 200
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "victoria-metrics did not become ready; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `/api/v1/status/buildinfo` answers with no version; builds that carry one show it as
    /// `vm_app_version{version="..."}` (Debian's 1.79 build carries none).
    async fn read_version(&self) -> String {
        let (_, metrics) = plain_http_get(self.addr(), "/metrics").await;
        metrics
            .lines()
            .find_map(|l| {
                let rest = l.strip_prefix("vm_app_version{")?;
                let v = rest.split("version=\"").nth(1)?;
                Some(v.split('"').next()?.to_string())
            })
            .filter(|v| !v.is_empty())
            .unwrap_or_else(|| "(the build carries no version)".into())
    }
}

fn spawn(binary: &Path, dir: &Path, config: &Path, port: u16) -> Child {
    let log = std::fs::File::create(dir.join("victoria-metrics.log")).unwrap();
    Command::new(binary)
        .arg(format!("-promscrape.config={}", config.display()))
        .arg(format!("-storageDataPath={}", dir.join("data").display()))
        .arg(format!("-httpListenAddr=127.0.0.1:{port}"))
        .stdout(Stdio::from(log.try_clone().unwrap()))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()))
}

impl Drop for VictoriaMetricsProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
