//! The real control plane (tests/control-plane: etcd, kube-apiserver with its aggregator,
//! kube-controller-manager, a scheduler/kubelet stand-in), one per test binary, started on
//! first use and gone when the binary exits: its supervisor runs with `--exit-with-stdin`, and
//! the pipe to its stdin closes with this process however it ends; its children die with it.
//!
//! Each test takes its own namespace (`namespace`). The aggregated metrics APIServices are one
//! per cluster, so a test that registers an adapter holds the `exclusive` guard.

use hpa_bridge_kit::exporter::{Behaviour, TestExporter};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::peers;

pub struct ControlPlane {
    dir: tempfile::TempDir,
    kubeconfig: PathBuf,
    supervisor: Mutex<Child>,
    /// Held open for the life of the test binary: its end stops the control plane.
    _stdin: Mutex<ChildStdin>,
    registration: tokio::sync::Mutex<()>,
    /// Held while the base's objects are applied: two `kubectl apply`s creating the same
    /// object at once fail with AlreadyExists.
    base: Mutex<()>,
    namespaces: AtomicU32,
    _in_use: std::fs::File,
}

static SHARED: OnceLock<ControlPlane> = OnceLock::new();

/// A control plane's directory (certificates, etcd data, logs: about 60 MB) lives in the temp
/// directory under this prefix. The test binary's statics are never dropped, so its directory
/// outlives it; the next run removes it.
const DIR_PREFIX: &str = "hpa-bridge-cp.";
/// The file a running test binary holds locked inside its control plane's directory.
const IN_USE: &str = "in-use.lock";

/// Remove the control-plane directories of earlier runs: those whose lock nobody holds, and
/// those without one older than an hour (written before the lock existed). A directory another
/// test binary is using keeps its lock, and one just created is young.
fn sweep_stale_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        let dir = entry.path();
        let stale = match std::fs::File::open(dir.join(IN_USE)) {
            Ok(f) => f.try_lock().is_ok(),
            Err(_) => entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > Duration::from_secs(3600)),
        };
        if stale {
            let _ = std::fs::remove_dir_all(&dir);
        }
    }
}

/// The control-plane binary: `$HPA_BRIDGE_CONTROL_PLANE` (scripts/test builds it and sets
/// it), else built now by `scripts/cluster build`, which names the install step when Go is
/// missing.
fn binary() -> PathBuf {
    if let Some(p) = std::env::var_os("HPA_BRIDGE_CONTROL_PLANE").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "HPA_BRIDGE_CONTROL_PLANE={} is not a file: unset it, or run `scripts/cluster build`",
            p.display()
        );
        return p;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster");
    let out = Command::new(&script)
        .arg("build")
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/cluster build");
    assert!(
        out.status.success(),
        "`scripts/cluster build` failed (it needs Go >= 1.26: https://go.dev/doc/install); \
         scripts/test builds the control plane before the tests"
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

impl ControlPlane {
    /// The control plane of this test binary, started on first use (about half a minute).
    pub fn shared() -> &'static ControlPlane {
        SHARED.get_or_init(Self::start)
    }

    fn start() -> ControlPlane {
        let bin = binary();
        sweep_stale_dirs();
        let dir = tempfile::Builder::new()
            .prefix(DIR_PREFIX)
            .tempdir()
            .unwrap();
        // Held until this process exits (the kernel drops the lock): the sign that the
        // directory is in use, for the sweep of a later run.
        let in_use = std::fs::File::create(dir.path().join(IN_USE)).unwrap();
        in_use.lock().unwrap();
        let log = std::fs::File::create(dir.path().join("up.log")).unwrap();
        let mut child = Command::new(&bin)
            .arg("up")
            .arg("--dir")
            .arg(dir.path())
            .arg("--exit-with-stdin")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", bin.display()));
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(k) = line.strip_prefix("ready KUBECONFIG=") {
                    let _ = tx.send(PathBuf::from(k));
                }
            }
        });
        let kubeconfig = match rx.recv_timeout(Duration::from_secs(300)) {
            Ok(k) => k,
            Err(_) => {
                let _ = child.kill();
                panic!(
                    "the control plane did not get ready in 300 s; its log:\n{}\n(component logs in {})",
                    std::fs::read_to_string(dir.path().join("up.log")).unwrap_or_default(),
                    dir.path().join("logs").display()
                );
            }
        };
        ControlPlane {
            dir,
            kubeconfig,
            supervisor: Mutex::new(child),
            _stdin: Mutex::new(stdin),
            registration: tokio::sync::Mutex::new(()),
            base: Mutex::new(()),
            namespaces: AtomicU32::new(0),
            _in_use: in_use,
        }
    }

    /// The cluster-admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    #[allow(dead_code)]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The cluster's CA bundle (what verifies the API server).
    pub fn ca(&self) -> PathBuf {
        self.dir.path().join("pki/ca.crt")
    }

    /// The API server's URL, from the kubeconfig.
    pub fn server(&self) -> String {
        let port = std::fs::read_to_string(self.dir.path().join("ports"))
            .unwrap()
            .lines()
            .find_map(|l| l.strip_prefix("kube-apiserver=").map(str::to_string))
            .unwrap();
        format!("https://127.0.0.1:{port}")
    }

    /// A fresh namespace whose name starts with `prefix`.
    pub async fn namespace(&self, prefix: &str) -> String {
        let n = self.namespaces.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        self.eventually(&format!("namespace {name} created"), || {
            match self.try_kubectl(&["create", "namespace", &name]) {
                Ok(_) => Some(()),
                Err(e) if e.contains("AlreadyExists") => Some(()),
                Err(_) => None,
            }
        })
        .await;
        // The service-account controller makes `default` shortly; pods wait for it.
        self.eventually(&format!("service account default in {name}"), || {
            self.try_kubectl(&["get", "serviceaccount", "default", "-n", &name])
                .ok()
        })
        .await;
        name
    }

    /// kubectl as cluster-admin; `Err` carries stderr.
    pub fn try_kubectl(&self, args: &[&str]) -> Result<String, String> {
        self.try_kubectl_input(args, None)
    }

    pub fn try_kubectl_input(&self, args: &[&str], input: Option<&str>) -> Result<String, String> {
        kubectl_with(&self.kubeconfig, args, input)
    }

    /// kubectl as cluster-admin; panics with stderr on failure.
    pub fn kubectl(&self, args: &[&str]) -> String {
        self.try_kubectl(args)
            .unwrap_or_else(|e| panic!("kubectl {}: {e}", args.join(" ")))
    }

    /// `kubectl apply -f -` of YAML or JSON.
    pub fn apply(&self, manifest: &str) {
        self.try_kubectl_input(&["apply", "-f", "-"], Some(manifest))
            .unwrap_or_else(|e| panic!("kubectl apply: {e}\n{manifest}"));
    }

    /// `kubectl get ... -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> Value {
        let mut a = vec!["get"];
        a.extend_from_slice(args);
        a.extend_from_slice(&["-o", "json"]);
        serde_json::from_str(&self.kubectl(&a)).unwrap()
    }

    /// Poll (for up to 90 s) until `f` gives a value.
    pub async fn eventually<T>(&self, what: &str, f: impl FnMut() -> Option<T>) -> T {
        eventually_for(Duration::from_secs(90), what, f).await
    }

    /// The cluster to oneself: the aggregated metrics APIServices are one per cluster and a
    /// test may stop etcd, so the tests that register an adapter run one at a time.
    pub async fn exclusive(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.registration.lock().await
    }

    /// Register an adapter serving on https://127.0.0.1:`port` (scripts/cluster register:
    /// manifests/base's namespace, service account and RBAC, an ExternalName Service and the
    /// APIServices of `group`: external, custom or both), and wait for `Available=True`.
    pub async fn register(&self, port: u16, group: &str, ca: Option<&Path>) {
        let mut args = vec![
            "register".to_string(),
            "--kubeconfig".into(),
            self.kubeconfig.display().to_string(),
            "--port".into(),
            port.to_string(),
            "--group".into(),
            group.into(),
        ];
        if let Some(ca) = ca {
            args.push("--ca".into());
            args.push(ca.display().to_string());
        }
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cluster");
        let kubectl = peers::kubectl();
        let out = tokio::task::spawn_blocking(move || {
            Command::new(script)
                .args(&args)
                .env("KUBECTL", kubectl)
                .output()
        })
        .await
        .unwrap()
        .unwrap();
        assert!(
            out.status.success(),
            "scripts/cluster register failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A kubeconfig that authenticates as the service account `namespace/name` with a
    /// token from the TokenRequest API, as a pod of it would.
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let token = self.kubectl(&["create", "token", name, "-n", namespace, "--duration=2h"]);
        let path = self
            .dir
            .path()
            .join(format!("sa-{namespace}-{name}.kubeconfig"));
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    token: {}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u, namespace: {namespace}}}\ncurrent-context: c\n",
            self.server(),
            self.ca().display(),
            token.trim()
        );
        std::fs::write(&path, text).unwrap();
        path
    }

    /// manifests/base's namespace, service account and RBAC, and a kubeconfig with that service
    /// account's token: hpa-bridge then runs with exactly the permissions the install grants.
    pub fn adapter_kubeconfig(&self) -> PathBuf {
        let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/base");
        let file = |f: &str| base.join(f).display().to_string();
        let _applying = self.base.lock().unwrap_or_else(|e| e.into_inner());
        self.kubectl(&[
            "apply",
            "-f",
            &file("namespace.yaml"),
            "-f",
            &file("serviceaccount.yaml"),
            "-f",
            &file("rbac.yaml"),
        ]);
        self.service_account_kubeconfig("hpa-bridge", "hpa-bridge")
    }

    /// `.spec.replicas` of `kind/name` in `namespace`.
    pub fn replicas(&self, namespace: &str, kind: &str, name: &str) -> i64 {
        self.get_json(&[kind, name, "-n", namespace])["spec"]["replicas"]
            .as_i64()
            .unwrap()
    }

    /// Wait (up to 90 s) until `kind/name` has `want` replicas in its spec, and as many pods
    /// Ready.
    pub async fn wait_replicas(&self, namespace: &str, kind: &str, name: &str, want: i64) {
        self.eventually(&format!("{kind}/{name} at {want} ready replicas"), || {
            let v = self.get_json(&[kind, name, "-n", namespace]);
            let ready = v["status"]["readyReplicas"].as_i64().unwrap_or(0);
            (v["spec"]["replicas"].as_i64() == Some(want) && ready == want).then_some(())
        })
        .await;
    }

    /// Whether the real authorizer allows `user` in `groups` the request `attributes` (a
    /// SubjectAccessReview's `resourceAttributes`), asked as cluster-admin.
    pub fn allows(&self, user: &str, groups: &[&str], attributes: Value) -> bool {
        let review = serde_json::json!({
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
        });
        let out = self
            .try_kubectl_input(
                &["create", "-o", "json", "-f", "-"],
                Some(&review.to_string()),
            )
            .unwrap_or_else(|e| panic!("SubjectAccessReview for {user}: {e}"));
        serde_json::from_str::<Value>(&out).unwrap()["status"]["allowed"] == true
    }

    /// `kubectl auth can-i` as `user`: what the real authorizer decides now.
    pub fn can_as(&self, user: &str, args: &[&str]) -> bool {
        let who = format!("--as={user}");
        let mut a = vec!["auth", "can-i", who.as_str()];
        a.extend_from_slice(args);
        let out = std::process::Command::new(peers::kubectl())
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .args(&a)
            .output()
            .unwrap();
        // kubectl prints yes (exit 0) or no (exit 1); anything else is a mistake in the
        // question (say, an unknown resource), which must not pass for a "no".
        match String::from_utf8_lossy(&out.stdout).trim() {
            "yes" => true,
            "no" => false,
            other => panic!(
                "kubectl auth can-i {}: {other} {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            ),
        }
    }

    /// What the API server's audit log holds of `user`'s requests (tests/control-plane records
    /// service accounts outside kube-system at Metadata level, their SubjectAccessReviews with
    /// the body), each as the authorizer saw it.
    /// The log is written before each response (blocking mode), so a request that returned
    /// is in it.
    pub fn audited(&self, user: &str) -> Vec<Audited> {
        let text =
            std::fs::read_to_string(self.dir.path().join("logs/audit.log")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            // A watch is logged when its response starts (and again when it ends); every
            // other request once, complete.
            .filter(|e| {
                e["user"]["username"] == user
                    && match e["verb"].as_str() {
                        Some("watch") => e["stage"] == "ResponseStarted",
                        _ => e["stage"] == "ResponseComplete",
                    }
            })
            .map(|e| {
                let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
                let o = &e["objectRef"];
                Audited {
                    verb: s(&e["verb"]),
                    uri: s(&e["requestURI"]),
                    group: s(&o["apiGroup"]),
                    resource: s(&o["resource"]),
                    subresource: s(&o["subresource"]),
                    name: s(&o["name"]),
                    request: e["requestObject"].clone(),
                    code: e["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
                }
            })
            .collect()
    }

    /// Stop etcd (the supervisor's SIGUSR1); `start_etcd` brings it back with its data.
    pub fn stop_etcd(&self) {
        self.signal("-USR1");
    }

    pub fn start_etcd(&self) {
        self.signal("-USR2");
    }

    fn signal(&self, sig: &str) {
        let pid = self.supervisor.lock().unwrap().id().to_string();
        let ok = Command::new("kill")
            .args([sig, &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {pid}");
    }
}

/// One request in the API server's audit log, with the attributes its authorizer decided on.
#[derive(Clone, Debug)]
pub struct Audited {
    pub verb: String,
    pub uri: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub name: String,
    /// The request's body, for the kinds logged at Request level (SubjectAccessReviews);
    /// null otherwise.
    pub request: Value,
    pub code: u16,
}

/// kubectl with `kubeconfig`; `Err` carries stderr.
pub fn kubectl_with(
    kubeconfig: &Path,
    args: &[&str],
    input: Option<&str>,
) -> Result<String, String> {
    use std::io::Write;
    let mut child = Command::new(peers::kubectl())
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn kubectl");
    if let Some(text) = input {
        child
            .stdin
            .take()
            .unwrap()
            .write_all(text.as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Poll every 250 ms until `f` gives a value, or fail naming `what`.
pub async fn eventually_for<T>(
    timeout: Duration,
    what: &str,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// A kube-rs client as cluster-admin.
pub async fn client(cp: &ControlPlane) -> kube::Client {
    let kc = kube::config::Kubeconfig::read_from(cp.kubeconfig()).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
            .await
            .unwrap();
    kube::Client::try_from(config).unwrap()
}

/// The exporters of a namespace's pods, each on the pod's own address (the stand-in kubelet
/// gives every pod one in 127.1.0.0/16) at `port`, serving `/metrics` from a page the test
/// sets per pod name. A pod without a page serves 404, as an exporter that is not up yet.
pub struct PodPages {
    pub port: u16,
    pages: std::sync::Arc<Mutex<std::collections::HashMap<String, Behaviour>>>,
    task: tokio::task::JoinHandle<()>,
}

impl PodPages {
    pub async fn start(cp: &ControlPlane, namespace: &str) -> Self {
        use k8s_openapi::api::core::v1::Pod;
        let port = super::free_port();
        let pages: std::sync::Arc<Mutex<std::collections::HashMap<String, Behaviour>>> =
            Default::default();
        let api: kube::Api<Pod> = kube::Api::namespaced(client(cp).await, namespace);
        let shared = pages.clone();
        let task = tokio::spawn(async move {
            let mut running = Exporters::default();
            let running = &mut running.0;
            loop {
                if let Ok(list) = api.list(&Default::default()).await {
                    let mut seen = std::collections::HashSet::new();
                    for pod in list.items {
                        let name = pod.metadata.name.clone().unwrap_or_default();
                        let Some(ip) = pod.status.and_then(|s| s.pod_ip) else {
                            continue;
                        };
                        let key = (name.clone(), ip.clone());
                        seen.insert(key.clone());
                        if !running.contains_key(&key) {
                            let addr = std::net::SocketAddr::new(ip.parse().unwrap(), port);
                            match TestExporter::start_on(addr).await {
                                Ok(ex) => {
                                    running.insert(key.clone(), ex);
                                }
                                Err(e) => eprintln!("exporter for pod {name} on {addr}: {e}"),
                            }
                        }
                        if let Some(ex) = running.get(&key) {
                            match shared.lock().unwrap().get(&name) {
                                Some(page) => ex.set("/metrics", page.clone()),
                                None => ex.set(
                                    "/metrics",
                                    Behaviour {
                                        body: "no page yet\n".into(),
                                        status: 404,
                                        delay: Duration::ZERO,
                                    },
                                ),
                            }
                        }
                    }
                    running.retain(|key, ex| {
                        let keep = seen.contains(key);
                        if !keep {
                            ex.stop();
                        }
                        keep
                    });
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        PodPages { port, pages, task }
    }

    /// What pod `name` exports from now on.
    pub fn set(&self, name: &str, page: impl Into<String>) {
        self.pages
            .lock()
            .unwrap()
            .insert(name.into(), Behaviour::ok(page));
    }

    /// Pod `name`'s exporter answers `status` from now on, with its page as the body.
    pub fn set_status(&self, name: &str, status: u16) {
        let mut pages = self.pages.lock().unwrap();
        let page = pages
            .entry(name.into())
            .or_insert_with(|| Behaviour::ok(""));
        page.status = status;
    }

    /// The pod template annotations that point the adapter's discovery at these exporters.
    pub fn annotations(&self) -> String {
        format!(
            "{{prometheus.io/scrape: \"true\", prometheus.io/port: \"{}\", prometheus.io/path: /metrics}}",
            self.port
        )
    }
}

impl Drop for PodPages {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The exporters `PodPages` runs; they stop when it goes (its task is aborted).
#[derive(Default)]
struct Exporters(std::collections::HashMap<(String, String), TestExporter>);

impl Drop for Exporters {
    fn drop(&mut self) {
        for ex in self.0.values() {
            ex.stop();
        }
    }
}
