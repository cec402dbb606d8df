//! hpa-bridge against a real control plane (tests/control-plane): kube-apiserver 1.37 with its
//! aggregator, kube-controller-manager's HPA and StatefulSet controllers, and the stand-in
//! scheduler and kubelet. The adapter runs as a local process with manifests/base's service
//! account and RBAC, registered through an ExternalName Service (scripts/cluster register);
//! the pods' exporters listen on the pods' own addresses.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use hpa_bridge_kit::exporter::TestExporter;

use crate::common::control_plane::{kubectl_with, ControlPlane, PodPages};
use crate::common::*;

fn external_path(ns: &str) -> String {
    format!(
        "/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/hpa_target_replicas?labelSelector=hpa_target_name%3Dlobby"
    )
}

/// The adapter as the manifests run it, with the hpa-bridge service account's token for
/// discovery and for the delegated TokenReview and SubjectAccessReview; its auth decisions
/// are logged.
async fn start_adapter(cp: &ControlPlane, scrape: &str) -> AdapterProcess {
    start_adapter_with(cp, scrape, &[]).await
}

/// The same, with `more` flags.
pub(crate) async fn start_adapter_with(
    cp: &ControlPlane,
    scrape: &str,
    more: &[&str],
) -> AdapterProcess {
    let kubeconfig = cp.adapter_kubeconfig();
    let k = kubeconfig.to_str().unwrap();
    let config = format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n{scrape}"
    );
    let mut args = vec!["--kubeconfig", k, "--authentication-kubeconfig", k];
    args.extend_from_slice(more);
    // The memory's ConfigMap and Lease have one name per install: only the tests about it
    // keep one, with the cluster to themselves, so no other test's adapter writes theirs.
    if !more.iter().any(|a| a.starts_with("--memory")) {
        args.push("--no-memory");
    }
    AdapterProcess::start_with_env(
        &config,
        &args,
        &[("RUST_LOG", "info,hpa_bridge_server::auth=debug")],
    )
    .await
}

fn discovery(ns: &str) -> String {
    format!("  kubernetes:\n    namespaces: [{ns}]\n")
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// The one item's value of a metric list.
fn value_of(body: &str) -> Option<String> {
    let v: Value = serde_json::from_str(body).ok()?;
    v["items"][0]["value"].as_str().map(String::from)
}

/// The log without its terminal colours (ESC [ ... m).
fn plain(log: &str) -> String {
    let mut out = String::with_capacity(log.len());
    let mut chars = log.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The adapter's log line that admitted `user` with `method`.
fn admitted(adapter: &AdapterProcess, user: &str, method: &str) -> bool {
    plain(&adapter.log()).lines().any(|l| {
        l.contains("allowed") && l.contains(&format!("user={user} ")) && l.contains(method)
    })
}

/// hpa-bridge over two static targets in `ns`: a controller instance recommending 3 for
/// `lobby`, and `lobby-0` holding nothing. The exporter lives as long as the caller keeps it.
async fn static_lobby(cp: &ControlPlane, ns: &str) -> (TestExporter, AdapterProcess) {
    let ex = TestExporter::start().await;
    ex.page("/ctl", expect_page("ctl-0", "3"));
    ex.page("/lobby-0", index_page("lobby-0", "0"));
    let adapter = start_adapter(
        cp,
        &static_targets(&[
            (ex.url("/ctl"), ns, "ctl-0"),
            (ex.url("/lobby-0"), ns, "lobby-0"),
        ]),
    )
    .await;
    (ex, adapter)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_aggregator_reaches_hpa_bridge_as_the_front_proxy_and_rbac_decides() {
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    let ns = cp.namespace("aggregator").await;
    let (_ex, adapter) = static_lobby(cp, &ns).await;
    cp.register(adapter.port, "both", None).await;

    for name in [
        "v1beta1.external.metrics.k8s.io",
        "v1beta2.custom.metrics.k8s.io",
        "v1beta1.custom.metrics.k8s.io",
    ] {
        let api = cp.get_json(&["apiservice", name]);
        let available = condition(&api, "Available").unwrap();
        assert_eq!(available["status"], "True", "{name}: {available}");
    }

    // External through the aggregator, as cluster-admin.
    let external = external_path(&ns);
    let body = cp
        .eventually("the External answer through the aggregator", || {
            cp.try_kubectl(&["get", "--raw", &external])
                .ok()
                .filter(|b| value_of(b).as_deref() == Some("3"))
        })
        .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["kind"], "ExternalMetricValueList", "{v}");
    // It reached hpa-bridge over the aggregator's front-proxy client certificate, with the
    // user in the request headers.
    assert!(
        admitted(&adapter, "kubernetes-admin", "front-proxy"),
        "no front-proxy admission of kubernetes-admin in the log:\n{}",
        adapter.log()
    );

    // Object through custom.metrics.k8s.io v1beta2.
    let object = format!(
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/statefulsets.apps/lobby/hpa_target_replicas"
    );
    let body = cp
        .eventually("the Object answer through the aggregator", || {
            cp.try_kubectl(&["get", "--raw", &object])
                .ok()
                .filter(|b| value_of(b).as_deref() == Some("3"))
        })
        .await;
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["items"][0]["describedObject"]["name"], "lobby", "{v}");

    // A service account without RBAC: refused with 403.
    cp.kubectl(&["create", "serviceaccount", "reader", "-n", &ns]);
    let reader = cp.service_account_kubeconfig(&ns, "reader");
    let err = kubectl_with(&reader, &["get", "--raw", &external], None).unwrap_err();
    assert!(
        err.contains("Forbidden") || err.contains("forbidden") || err.contains("403"),
        "{err}"
    );
    // With the install's read role (manifests/check/rbac.yaml) bound: an answer, checked again
    // by hpa-bridge's own SubjectAccessReview for that user.
    let check_rbac = Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/check/rbac.yaml");
    cp.kubectl(&["apply", "-f", check_rbac.to_str().unwrap()]);
    cp.kubectl(&[
        "create",
        "rolebinding",
        "reader-check",
        "-n",
        &ns,
        "--clusterrole=hpa-bridge:check",
        &format!("--serviceaccount={ns}:reader"),
    ]);
    cp.eventually("the bound service account's answer", || {
        kubectl_with(&reader, &["get", "--raw", &external], None)
            .ok()
            .filter(|b| value_of(b).as_deref() == Some("3"))
    })
    .await;
    let user = format!("system:serviceaccount:{ns}:reader");
    assert!(
        admitted(&adapter, &user, "front-proxy"),
        "no front-proxy admission of {user} in the log:\n{}",
        adapter.log()
    );

    // Straight to hpa-bridge, a forged X-Remote-User without the front-proxy certificate.
    let forged = [
        ("X-Remote-User", "kubernetes-admin"),
        ("X-Remote-Group", "system:masters"),
    ];
    let (code, body) = adapter.client().get(&external, &forged).await.unwrap();
    assert!(
        code == 401 || code == 403,
        "forged headers answered {code}: {body}"
    );

    // With a client certificate from the cluster CA that is not the front proxy's, the headers
    // are not read: the certificate's own user, who has no RBAC, is checked and refused.
    let pki = cp.dir().join("pki");
    let with_cert = |name: &str| {
        HttpsClient::new(
            adapter.port,
            &[adapter.pki.ca_der()],
            Some((
                &pki.join(format!("{name}.crt")),
                &pki.join(format!("{name}.key")),
            )),
        )
    };
    let (code, body) = with_cert("unprivileged")
        .get(&external, &forged)
        .await
        .unwrap();
    assert_eq!(
        code, 403,
        "a client certificate's headers were believed: {body}"
    );
    assert!(
        body.contains("hpa-bridge-test-unprivileged"),
        "the refusal names the certificate's user: {body}"
    );
    // system:kube-controller-manager may list every resource (its bootstrap role grants
    // list/watch on */* for the garbage collector and quota), so its certificate is answered,
    // as itself.
    let (code, body) = with_cert("kube-controller-manager")
        .get(&external, &forged)
        .await
        .unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(
        admitted(
            &adapter,
            "system:kube-controller-manager",
            "client-certificate"
        ),
        "no client-certificate admission of system:kube-controller-manager:\n{}",
        adapter.log()
    );
}

/// The StatefulSet `lobby` and the controller instances' StatefulSet `lobby-ctl` (whose pods
/// export the recommendation), both scraped through discovery.
fn workloads(ns: &str, pods: &PodPages, ctl_replicas: u32) -> String {
    let sts = |name: &str, replicas: u32| {
        format!(
            "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  replicas: {replicas}\n  serviceName: {name}\n  podManagementPolicy: Parallel\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata:\n      labels: {{app: {name}}}\n      annotations: {}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: app, image: app.invalid/{name}:1}}]\n",
            pods.annotations()
        )
    };
    format!("{}---\n{}", sts("lobby", 1), sts("lobby-ctl", ctl_replicas))
}

/// An HPA on hpa_target_replicas with AverageValue 1, min..10, and windows of a few seconds.
pub(crate) fn hpa(ns: &str, min: u32, metric: &str) -> String {
    format!(
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {{name: lobby, namespace: {ns}}}\nspec:\n  scaleTargetRef: {{apiVersion: apps/v1, kind: StatefulSet, name: lobby}}\n  minReplicas: {min}\n  maxReplicas: 10\n  metrics:\n{metric}  behavior:\n    scaleUp:\n      stabilizationWindowSeconds: 0\n      policies: [{{type: Pods, value: 10, periodSeconds: 1}}]\n    scaleDown:\n      stabilizationWindowSeconds: 3\n      policies: [{{type: Pods, value: 10, periodSeconds: 1}}]\n"
    )
}

pub(crate) const EXTERNAL_METRIC: &str = "  - type: External\n    external:\n      metric: {name: hpa_target_replicas, selector: {matchLabels: {hpa_target_name: lobby}}}\n      target: {type: AverageValue, averageValue: \"1\"}\n";

const OBJECT_METRIC: &str = "  - type: Object\n    object:\n      describedObject: {apiVersion: apps/v1, kind: StatefulSet, name: lobby}\n      metric: {name: hpa_target_replicas}\n      target: {type: AverageValue, averageValue: \"1\"}\n";

/// `spec.replicas` stays `want` for `secs` seconds.
async fn holds(cp: &ControlPlane, ns: &str, want: i64, secs: u64) {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        let got = cp.replicas(ns, "statefulset", "lobby");
        assert_eq!(got, want, "lobby left {want} replicas");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn lobby_indices(pods: &PodPages, indices: &[u32]) {
    for i in 0..10u32 {
        let name = format!("lobby-{i}");
        let index = indices.get(i as usize).copied().unwrap_or(0);
        pods.set(&name, index_page(&name, &index.to_string()));
    }
}

/// StatefulSet `lobby` with its HPA, the controller instances `lobby-ctl-0` and `-1`, and
/// hpa-bridge registered, with the cluster to itself.
pub(crate) struct Lobby {
    pub(crate) cp: &'static ControlPlane,
    pub(crate) ns: String,
    pods: PodPages,
    pub(crate) adapter: Option<AdapterProcess>,
    _cluster: tokio::sync::MutexGuard<'static, ()>,
}

impl Lobby {
    pub(crate) async fn start(metric: &str, group: &str, min: u32, recommendation: u32) -> Lobby {
        Self::start_with(metric, group, min, recommendation, &[]).await
    }

    /// The same, with `more` flags for hpa-bridge.
    async fn start_with(
        metric: &str,
        group: &str,
        min: u32,
        recommendation: u32,
        more: &[&str],
    ) -> Lobby {
        let cp = ControlPlane::shared();
        let cluster = cp.exclusive().await;
        let ns = cp.namespace("lobby").await;
        let pods = PodPages::start(cp, &ns).await;
        let lobby = Lobby {
            cp,
            ns,
            pods,
            adapter: None,
            _cluster: cluster,
        };
        lobby.recommend(recommendation, recommendation);
        lobby.indices(&[]);
        cp.apply(&workloads(&lobby.ns, &lobby.pods, 2));
        let adapter = start_adapter_with(cp, &discovery(&lobby.ns), more).await;
        cp.register(adapter.port, group, None).await;
        cp.apply(&hpa(&lobby.ns, min, metric));
        Lobby {
            adapter: Some(adapter),
            ..lobby
        }
    }

    /// What the two controller instances export.
    pub(crate) fn recommend(&self, first: u32, second: u32) {
        self.pods
            .set("lobby-ctl-0", expect_page("ctl-0", &first.to_string()));
        self.pods
            .set("lobby-ctl-1", expect_page("ctl-1", &second.to_string()));
    }

    /// The stateful indices of lobby-0, lobby-1, ...; 0 for the rest.
    fn indices(&self, indices: &[u32]) {
        lobby_indices(&self.pods, indices);
    }

    pub(crate) async fn reaches(&self, want: i64) {
        self.cp
            .wait_replicas(&self.ns, "statefulset", "lobby", want)
            .await;
    }

    pub(crate) async fn holds(&self, want: i64, secs: u64) {
        holds(self.cp, &self.ns, want, secs).await;
    }

    fn hpa(&self) -> Value {
        self.cp.get_json(&["hpa", "lobby", "-n", &self.ns])
    }
}

async fn follows(metric: &str, group: &str) {
    let lobby = Lobby::start(metric, group, 1, 2).await;
    // The recommendation 2, then 5: the real HPA applies each.
    lobby.reaches(2).await;
    // Two controller instances at 5 and 3: the max, not the sum.
    lobby.recommend(5, 3);
    lobby.reaches(5).await;
    lobby.holds(5, 4).await;

    // The recommendation drops to 2 while ordinal 3 holds state (index 4): the floor keeps 4.
    lobby.indices(&[0, 0, 0, 4]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    lobby.recommend(2, 2);
    lobby.reaches(4).await;
    lobby.holds(4, 6).await;
    // The index is released: down to the recommendation.
    lobby.indices(&[]);
    lobby.reaches(2).await;
    assert_eq!(lobby.hpa()["status"]["desiredReplicas"], 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_hpa_follows_the_external_target_max_and_floor() {
    follows(EXTERNAL_METRIC, "external").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_hpa_follows_the_object_target_max_and_floor() {
    follows(OBJECT_METRIC, "custom").await;
}

/// The HPA's condition of `kind` once its status is `status`.
async fn hpa_condition(lobby: &Lobby, kind: &str, status: &str) -> Value {
    lobby
        .cp
        .eventually(&format!("HPA condition {kind}={status}"), || {
            let hpa = lobby.hpa();
            condition(&hpa, kind)
                .filter(|c| c["status"] == status)
                .cloned()
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_recommender_is_refused_and_the_real_hpa_keeps_its_size_with_our_message() {
    let lobby = Lobby::start(EXTERNAL_METRIC, "external", 1, 4).await;
    lobby.reaches(4).await;
    assert_eq!(
        hpa_condition(&lobby, "ScalingActive", "True").await["reason"],
        "ValidMetricFound"
    );
    // Both controller instances stop answering; their last values go stale.
    for pod in ["lobby-ctl-0", "lobby-ctl-1"] {
        lobby.pods.set_status(pod, 500);
    }
    let refusal = lobby
        .cp
        .eventually("hpa-bridge's refusal through the aggregator", || {
            lobby
                .cp
                .try_kubectl(&["get", "--raw", &external_path(&lobby.ns)])
                .err()
        })
        .await;
    let active = hpa_condition(&lobby, "ScalingActive", "False").await;
    assert_eq!(active["reason"], "FailedGetExternalMetric", "{active}");
    let message = active["message"].as_str().unwrap();
    // kubectl prints the Status message after "Error from server (...): ".
    let ours = refusal
        .trim()
        .rsplit_once("): ")
        .map_or(refusal.trim(), |(_, m)| m);
    assert!(
        message.contains(ours),
        "the HPA's condition does not carry hpa-bridge's message {ours:?}: {message}"
    );
    // A refusal never shrinks the workload: longer than the scale-down window.
    lobby.holds(4, 8).await;
}

const FLOOR_METRIC: &str = "  - type: External\n    external:\n      metric: {name: hpa_stateful_floor, selector: {matchLabels: {hpa_target_name: lobby}}}\n      target: {type: AverageValue, averageValue: \"1\"}\n";

/// The design's failure table, with a second metric: while the recommenders are stale, the
/// refused target makes the HPA's proposal invalid for a decrease (the floor's 0 does not shrink
/// the workload), but the floor rising above the count still scales it out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_target_blocks_scale_in_while_another_metric_still_scales_out() {
    let metrics = format!("{EXTERNAL_METRIC}{FLOOR_METRIC}");
    let lobby = Lobby::start(&metrics, "external", 1, 4).await;
    lobby.reaches(4).await;
    for pod in ["lobby-ctl-0", "lobby-ctl-1"] {
        lobby.pods.set_status(pod, 500);
    }
    let active = hpa_condition(&lobby, "ScalingActive", "False").await;
    assert_eq!(active["reason"], "FailedGetExternalMetric", "{active}");
    lobby.holds(4, 6).await;
    // Ordinal 3 now reports index 6: the floor alone asks for 6, and the HPA follows.
    lobby.indices(&[0, 0, 0, 6]);
    lobby.reaches(6).await;
}

/// A restart forgets nothing that matters (docs/unknown-input.md): the leader (4) fails beside
/// a former leader still exporting 1, and hpa-bridge is restarted meanwhile. Before the
/// restart the leader's retained 4 refuses the lower answer; after it, the leader has never
/// been scraped by the new process, its sibling carries the series, so it still refuses. The
/// real HPA keeps 4 throughout, and takes the leader's value once it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_during_a_recommender_outage_does_not_shrink_the_workload() {
    let mut lobby = Lobby::start(EXTERNAL_METRIC, "external", 1, 4).await;
    lobby.reaches(4).await;
    lobby.recommend(4, 1);
    lobby.pods.set_status("lobby-ctl-0", 500);
    let cp = lobby.cp;
    let path = external_path(&lobby.ns);
    cp.eventually("the refusal before the restart", || {
        cp.try_kubectl(&["get", "--raw", &path]).err()
    })
    .await;
    lobby.holds(4, 4).await;

    drop(lobby.adapter.take());
    let adapter = start_adapter(cp, &discovery(&lobby.ns)).await;
    cp.register(adapter.port, "external", None).await;
    lobby.adapter = Some(adapter);
    let refusal = cp
        .eventually("the refusal after the restart", || {
            cp.try_kubectl(&["get", "--raw", &path])
                .err()
                .filter(|e| e.contains("never been scraped"))
        })
        .await;
    assert!(refusal.contains("lobby-ctl-0"), "{refusal}");
    lobby.holds(4, 8).await;

    // The leader answers again and asks for 5: served and applied.
    lobby.recommend(5, 1);
    lobby.reaches(5).await;
}

/// The targets whose identity starts with `prefix` in the memory hpa-bridge wrote, once it has
/// written one.
fn written_memory(cp: &ControlPlane, prefix: &str) -> Option<Vec<Value>> {
    let cm = cp
        .try_kubectl(&[
            "get",
            "configmap",
            "hpa-bridge-memory",
            "-n",
            "hpa-bridge",
            "-o",
            "json",
        ])
        .ok()?;
    let cm: Value = serde_json::from_str(&cm).ok()?;
    let memory: Value = serde_json::from_str(cm["data"]["memory.json"].as_str()?).ok()?;
    let targets = memory["targets"].as_array()?.iter();
    Some(
        targets
            .filter(|t| t["id"].as_str().is_some_and(|id| id.starts_with(prefix)))
            .cloned()
            .collect(),
    )
}

/// The memory closes the hole a restart leaves without it (docs/unknown-input.md): the
/// recommender StatefulSet `lobby-ctl` (4) fails whole beside a second recommender, `lobby-alt`,
/// exporting 1. Restarted with the memory the replica holding its Lease wrote, hpa-bridge reads
/// both ctl pods as failing since with their last value 4, refuses the lower answer, and the real
/// HPA keeps 4. Restarted without it, the ctl pods look like any unrelated pod: 1 is served and
/// the real HPA scales in, which is what the memory prevents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_given_the_memory_keeps_a_whole_failing_recommender_known() {
    let memory = ["--memory-write-interval=1s"];
    let mut lobby = Lobby::start_with(EXTERNAL_METRIC, "external", 1, 4, &memory).await;
    let cp = lobby.cp;
    let ns = lobby.ns.clone();
    lobby.pods.set("lobby-alt-0", expect_page("alt-0", "1"));
    cp.apply(&format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: lobby-alt, namespace: {ns}}}\nspec:\n  replicas: 1\n  serviceName: lobby-alt\n  selector: {{matchLabels: {{app: lobby-alt}}}}\n  template:\n    metadata:\n      labels: {{app: lobby-alt}}\n      annotations: {}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: app, image: app.invalid/lobby-alt:1}}]\n",
        lobby.pods.annotations()
    ));
    lobby.reaches(4).await;
    let path = external_path(&ns);
    cp.eventually("the answer 4 with lobby-alt scraped", || {
        cp.try_kubectl(&["get", "--raw", &path])
            .ok()
            .filter(|b| value_of(b).as_deref() == Some("4"))
    })
    .await;
    // The writer's memory holds both ctl pods with their 4.
    cp.eventually("the memory written with both ctl pods", || {
        let ctl = written_memory(cp, &format!("{ns}/lobby-ctl-"))?;
        (ctl.len() == 2 && ctl.iter().all(|t| t["series"][0]["value"] == 4)).then_some(())
    })
    .await;

    // What the memory costs: writes while every value holds, and while one changes every
    // 500 ms (lobby-alt between 1 and 2, below the max), at --memory-write-interval=1s. First
    // every pod is in it (lobby's four, the two ctl pods, lobby-alt).
    let written = cp
        .eventually("the memory holding all seven pods", || {
            written_memory(cp, &format!("{ns}/")).filter(|ours| ours.len() == 7)
        })
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let adapter = lobby.adapter.as_ref().unwrap();
    let writes = || async {
        let (_, body) = adapter.plain_get("/metrics").await;
        body.lines()
            .filter(|l| l.starts_with("hpa_bridge_memory_writes_total{result=\"success\"}"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    let window = Duration::from_secs(10);
    let before = writes().await;
    tokio::time::sleep(window).await;
    let steady = writes().await - before;
    let before = writes().await;
    let until = Instant::now() + window;
    let mut value = 1;
    while Instant::now() < until {
        value = 3 - value;
        lobby
            .pods
            .set("lobby-alt-0", expect_page("alt-0", &value.to_string()));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let changing = writes().await - before;
    lobby.pods.set("lobby-alt-0", expect_page("alt-0", "1"));
    let report = format!(
        "memory writes in {window:?} at --memory-write-interval=1s: steady values {steady}, one value changing every 500 ms {changing}; memory {} bytes, {} targets\n",
        serde_json::to_string(&written).unwrap().len(),
        written.len()
    );
    eprint!("{report}");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/tmp");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(dir.join("memory-writes.txt"), &report);
    assert_eq!(steady, 0.0, "{report}");
    assert!((1.0..=11.0).contains(&changing), "{report}");

    for pod in ["lobby-ctl-0", "lobby-ctl-1"] {
        lobby.pods.set_status(pod, 500);
    }
    cp.eventually("the refusal before the restart", || {
        cp.try_kubectl(&["get", "--raw", &path]).err()
    })
    .await;

    drop(lobby.adapter.take());
    let adapter = start_adapter_with(cp, &discovery(&ns), &memory).await;
    cp.register(adapter.port, "external", None).await;
    // Both ctl pods read from memory: each named with its last value, neither as never scraped.
    let refusal = cp
        .eventually("the refusal after the restart, from memory", || {
            cp.try_kubectl(&["get", "--raw", &path])
                .err()
                .filter(|e| e.contains("lobby-ctl-0") && e.contains("lobby-ctl-1"))
        })
        .await;
    assert!(
        refusal.contains("with last value 4") && !refusal.contains("never been scraped"),
        "{refusal}"
    );
    assert!(
        adapter.log().contains("targets read from the memory"),
        "{}",
        adapter.log()
    );
    lobby.adapter = Some(adapter);
    lobby.holds(4, 8).await;

    // Control: the same restart without the memory serves lobby-alt's 1, and the real HPA
    // follows it down.
    drop(lobby.adapter.take());
    let adapter = start_adapter(cp, &discovery(&ns)).await;
    cp.register(adapter.port, "external", None).await;
    lobby.adapter = Some(adapter);
    cp.eventually("lobby-alt's 1 served without the memory", || {
        cp.try_kubectl(&["get", "--raw", &path])
            .ok()
            .filter(|b| value_of(b).as_deref() == Some("1"))
    })
    .await;
    lobby.reaches(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_hpa_bridge_the_apiservice_is_unavailable_and_the_workload_keeps_its_size() {
    let mut lobby = Lobby::start(EXTERNAL_METRIC, "external", 1, 3).await;
    lobby.reaches(3).await;
    // Killed, as by SIGKILL: no goodbye.
    drop(lobby.adapter.take());
    let cp = lobby.cp;
    cp.eventually("the APIService unavailable", || {
        let api = cp.get_json(&["apiservice", "v1beta1.external.metrics.k8s.io"]);
        condition(&api, "Available")
            .filter(|c| c["status"] == "False")
            .cloned()
    })
    .await;
    hpa_condition(&lobby, "ScalingActive", "False").await;
    lobby.holds(3, 8).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_etcd_outage_of_30_s_drives_no_scale_in_and_the_hpa_recovers() {
    let lobby = Lobby::start(EXTERNAL_METRIC, "external", 1, 4).await;
    lobby.reaches(4).await;
    let cp = lobby.cp;
    cp.stop_etcd();
    tokio::time::sleep(Duration::from_secs(30)).await;
    cp.start_etcd();
    // Once the API server answers again, nothing was scaled in meanwhile.
    let replicas = cp
        .eventually("the API server back", || {
            cp.try_kubectl(&[
                "get",
                "statefulset",
                "lobby",
                "-n",
                &lobby.ns,
                "-o",
                "jsonpath={.spec.replicas}",
            ])
            .ok()
        })
        .await;
    assert_eq!(replicas.trim(), "4", "the outage drove a scale change");
    lobby.holds(4, 5).await;
    // The answers and the HPA recover: a new recommendation is followed.
    lobby.recommend(6, 1);
    lobby.reaches(6).await;
}

/// `kubectl auth can-i` as hpa-bridge's service account.
fn can(cp: &ControlPlane, args: &[&str]) -> bool {
    cp.can_as("system:serviceaccount:hpa-bridge:hpa-bridge", args)
}

/// What `serve` asks of the API server (the server crate's auth: TokenReview, SubjectAccessReview, the
/// extension-apiserver-authentication ConfigMap; hpa-bridge-sources' discovery: list and watch
/// of pods and their workloads in every namespace).
const SERVE_USES: &[&[&str]] = &[
    &["list", "pods", "-A"],
    &["watch", "pods", "-A"],
    &["list", "statefulsets.apps", "-A"],
    &["watch", "statefulsets.apps", "-A"],
    &["list", "replicasets.apps", "-A"],
    &["watch", "replicasets.apps", "-A"],
    &["list", "deployments.apps", "-A"],
    &["watch", "deployments.apps", "-A"],
    // src/prediction: the HPAs, and each predicted target's scale.
    &["list", "horizontalpodautoscalers.autoscaling", "-A"],
    &["watch", "horizontalpodautoscalers.autoscaling", "-A"],
    &[
        "get",
        "statefulsets.apps/lobby",
        "--subresource=scale",
        "-n",
        "default",
    ],
    &[
        "get",
        "deployments.apps/web",
        "--subresource=scale",
        "-n",
        "default",
    ],
    &["create", "tokenreviews.authentication.k8s.io"],
    &["create", "subjectaccessreviews.authorization.k8s.io"],
    &[
        "get",
        "configmaps/extension-apiserver-authentication",
        "-n",
        "kube-system",
    ],
    // The duties crate's memory: the ConfigMap and the Lease of its one writer.
    &["get", "configmaps/hpa-bridge-memory", "-n", "hpa-bridge"],
    &["update", "configmaps/hpa-bridge-memory", "-n", "hpa-bridge"],
    &["create", "configmaps", "-n", "hpa-bridge"],
    &[
        "get",
        "leases.coordination.k8s.io/hpa-bridge-memory",
        "-n",
        "hpa-bridge",
    ],
    &[
        "update",
        "leases.coordination.k8s.io/hpa-bridge-memory",
        "-n",
        "hpa-bridge",
    ],
    &["create", "leases.coordination.k8s.io", "-n", "hpa-bridge"],
];

/// What `serve --write-deletion-cost` asks on top (the duties crate's deletion_cost: a merge patch of pods,
/// and get, create and update of its Lease).
const DELETION_COST_USES: &[&[&str]] = &[
    &["patch", "pods", "-n", "default"],
    &[
        "get",
        "leases.coordination.k8s.io/hpa-bridge-deletion-cost",
        "-n",
        "hpa-bridge",
    ],
    &[
        "update",
        "leases.coordination.k8s.io/hpa-bridge-deletion-cost",
        "-n",
        "hpa-bridge",
    ],
    &["create", "leases.coordination.k8s.io", "-n", "hpa-bridge"],
];

/// Nothing more: writes to workloads and pods, single reads (every read is a watch's list),
/// secrets, other ConfigMaps, other Leases.
const NEVER: &[&[&str]] = &[
    &["get", "pods", "-n", "default"],
    &["get", "statefulsets.apps", "-n", "default"],
    &["get", "deployments.apps", "-n", "default"],
    &["get", "secrets", "-n", "kube-system"],
    &["list", "secrets", "-A"],
    &["get", "configmaps", "-n", "default"],
    &["list", "configmaps", "-n", "kube-system"],
    &["update", "configmaps/other", "-n", "hpa-bridge"],
    &["get", "configmaps/other", "-n", "hpa-bridge"],
    &["delete", "configmaps/hpa-bridge-memory", "-n", "hpa-bridge"],
    &["list", "configmaps", "-n", "hpa-bridge"],
    &["update", "statefulsets.apps", "-n", "default"],
    &["patch", "statefulsets.apps/scale", "-n", "default"],
    &[
        "update",
        "statefulsets.apps/lobby",
        "--subresource=scale",
        "-n",
        "default",
    ],
    &[
        "get",
        "replicasets.apps/web",
        "--subresource=scale",
        "-n",
        "default",
    ],
    &[
        "get",
        "horizontalpodautoscalers.autoscaling",
        "-n",
        "default",
    ],
    &["update", "deployments.apps", "-n", "default"],
    &["delete", "pods", "-n", "default"],
    &["create", "pods", "-n", "default"],
    &["update", "pods/status", "-n", "default"],
    &[
        "update",
        "leases.coordination.k8s.io/other",
        "-n",
        "hpa-bridge",
    ],
    &[
        "delete",
        "leases.coordination.k8s.io/hpa-bridge-deletion-cost",
        "-n",
        "hpa-bridge",
    ],
    &[
        "update",
        "horizontalpodautoscalers.autoscaling",
        "-n",
        "default",
    ],
    &["create", "apiservices.apiregistration.k8s.io"],
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_rbac_grants_every_verb_hpa_bridge_uses_and_nothing_more() {
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    cp.adapter_kubeconfig();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let overlay = root.join("manifests/overlays/deletion-cost/rbac.yaml");
    let overlay = overlay.to_str().unwrap();
    cp.try_kubectl(&["delete", "--ignore-not-found", "-f", overlay])
        .unwrap();
    let denied = |uses: &[&[&str]]| -> Vec<String> {
        uses.iter()
            .filter(|a| !can(cp, a))
            .map(|a| a.join(" "))
            .collect()
    };
    let granted = |uses: &[&[&str]]| -> Vec<String> {
        uses.iter()
            .filter(|a| can(cp, a))
            .map(|a| a.join(" "))
            .collect()
    };
    assert_eq!(
        denied(SERVE_USES),
        Vec::<String>::new(),
        "base denies what serve uses"
    );
    assert_eq!(
        granted(DELETION_COST_USES)
            .into_iter()
            .filter(|a| a.starts_with("patch"))
            .collect::<Vec<_>>(),
        Vec::<String>::new(),
        "the base alone lets hpa-bridge patch pods"
    );
    assert_eq!(granted(NEVER), Vec::<String>::new(), "base grants more");

    cp.kubectl(&["apply", "-f", overlay]);
    assert_eq!(
        denied(DELETION_COST_USES),
        Vec::<String>::new(),
        "overlays/deletion-cost denies what the writer uses"
    );
    assert_eq!(
        granted(NEVER),
        Vec::<String>::new(),
        "overlays/deletion-cost grants more"
    );
    cp.kubectl(&["delete", "-f", overlay]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minreplicas_0_scales_to_zero_and_back_with_the_object_metric() {
    // The Object form names the workload, so at zero pods (no index series at all) its
    // spec.replicas, 0, is known and the target holds at max(recommendation, 0). An External
    // target cannot tell which workload an absent floor belongs to, refuses, and the HPA
    // stays at zero (docs/hpa-behaviour.md §7.4). `check` says so beforehand (HB024).
    use crate::check_cluster::{check, check_role_yaml, checker};
    let lobby = Lobby::start(OBJECT_METRIC, "both", 0, 2).await;
    let (cp, ns) = (lobby.cp, lobby.ns.as_str());
    // The recommenders are the lobby-ctl pods, outside lobby: said on the HPA for HB023.
    let outside = ["annotate", "hpa", "lobby", "-n", ns, "--overwrite"];
    let outside = [
        &outside[..],
        &["hpa-bridge.io/recommender=outside-workload"],
    ]
    .concat();
    cp.kubectl(&outside);
    cp.kubectl(&["apply", "-f", check_role_yaml().to_str().unwrap()]);
    let (kubeconfig, _) = checker(cp, ns, "checker", "hpa-bridge:check");
    let config = lobby.adapter.as_ref().unwrap().config_path();
    let args = ["--config", config.to_str().unwrap()];
    let checked = || check(&kubeconfig, ns, &args);
    let r = checked().await;
    assert_eq!(r.code, Some(0), "the Object form at minReplicas 0: {r}");
    assert!(!r.codes().contains("HB024"), "{r}");

    lobby.reaches(2).await;
    lobby.recommend(0, 0);
    lobby.reaches(0).await;
    lobby.holds(0, 3).await;
    lobby.recommend(3, 0);
    lobby.reaches(3).await;

    // The External form, as check warned: to 0 on a recommendation of 0, then never back.
    cp.apply(&hpa(ns, 0, EXTERNAL_METRIC));
    cp.kubectl(&outside);
    let r = checked().await;
    assert_eq!(r.code, Some(1), "{r}");
    let hb024 = r.findings("HB024");
    assert_eq!(hb024.len(), 1, "{r}");
    assert_eq!(hb024[0]["severity"], "error", "{r}");
    lobby.recommend(0, 0);
    lobby.reaches(0).await;
    lobby.recommend(3, 0);
    lobby.holds(0, 8).await;
    let hpa_now = cp.get_json(&["hpa", "lobby", "-n", ns]);
    let active = condition(&hpa_now, "ScalingActive")
        .cloned()
        .unwrap_or_default();
    assert_eq!(active["status"], "False", "{hpa_now}");

    // The adapter's model of the controller says the same, and its checks of the syncs at 0
    // hit: the External target is refused at 0 replicas, so the HPA stays there.
    let adapter = lobby.adapter.as_ref().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let predicted = loop {
        let status = adapter.status().await;
        let entry = status["hpas"][0].clone();
        let p = &entry["prediction"];
        if entry["next"]["desiredReplicas"] == 0
            && p["predicted"] == 0
            && p["actual"] == 0
            && p["missesInARow"] == 0
        {
            break entry;
        }
        assert!(Instant::now() < deadline, "the model at 0: {entry}");
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert_eq!(predicted["metrics"][0]["valid"], false, "{predicted}");
    assert_eq!(predicted["metrics"][0]["type"], "External", "{predicted}");
}

/// The pods of Deployment `web` (label app=web), oldest first.
fn web_pods(cp: &ControlPlane, ns: &str) -> Vec<Value> {
    let list = cp.get_json(&["pods", "-n", ns, "-l", "app=web"]);
    let mut pods: Vec<Value> = list["items"].as_array().cloned().unwrap_or_default();
    pods.sort_by_key(|p| {
        (
            p["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            p["metadata"]["name"].as_str().unwrap_or("").to_string(),
        )
    });
    pods
}

fn name_of(pod: &Value) -> String {
    pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The opted-in Deployment `web` with `replicas` ready pods whose exporters `pods` serves, and
/// the deletion-cost overlay's RBAC on top of the base (whose namespace, service account and
/// role `adapter_kubeconfig` applies); no Lease left from an earlier test. Its pods, oldest
/// first.
async fn opted_in_web(cp: &ControlPlane, ns: &str, pods: &PodPages, replicas: u32) -> Vec<String> {
    cp.adapter_kubeconfig();
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let overlay = root.join("manifests/overlays/deletion-cost/rbac.yaml");
    cp.kubectl(&["apply", "-f", overlay.to_str().unwrap()]);
    cp.kubectl(&[
        "delete",
        "lease",
        "hpa-bridge-deletion-cost",
        "-n",
        "hpa-bridge",
        "--ignore-not-found",
    ]);
    cp.apply(&format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {ns}\n  annotations: {{hpa-bridge.io/deletion-cost: stateful-index}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata:\n      labels: {{app: web}}\n      annotations: {}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: app, image: app.invalid/web:1}}]\n",
        pods.annotations()
    ));
    cp.wait_replicas(ns, "deployment", "web", replicas.into())
        .await;
    let names: Vec<String> = web_pods(cp, ns).iter().map(name_of).collect();
    assert_eq!(names.len(), replicas as usize, "{names:?}");
    names
}

/// `opted_in_web` with four pods, the two newest holding indices 1 and 2, each pod's page
/// written by `show`. All four names, and the holders'.
async fn two_of_four_holding(
    cp: &ControlPlane,
    ns: &str,
    pods: &PodPages,
    show: impl Fn(&PodPages, &str, usize),
) -> (Vec<String>, Vec<String>) {
    let names = opted_in_web(cp, ns, pods, 4).await;
    let holders: Vec<String> = names[2..].to_vec();
    for name in &names {
        let index = holders.iter().position(|h| h == name).map_or(0, |i| i + 1);
        show(pods, name, index);
    }
    (names, holders)
}

/// Pod `name` of `web` exports the stateful index `index`.
fn web_index(pods: &PodPages, name: &str, index: usize) {
    pods.set(
        name,
        format!(
            "# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{hpa_target_name=\"web\",service_instance_id=\"{name}\"}} {index}\n"
        ),
    );
}

/// Pod `name`'s `controller.kubernetes.io/pod-deletion-cost`, if any.
fn cost_of(cp: &ControlPlane, ns: &str, name: &str) -> Option<String> {
    cp.get_json(&["pod", name, "-n", ns])["metadata"]["annotations"]
        ["controller.kubernetes.io/pod-deletion-cost"]
        .as_str()
        .map(String::from)
}

/// The spec of the deletion-cost Lease.
fn lease_spec(cp: &ControlPlane) -> Value {
    cp.get_json(&["lease", "hpa-bridge-deletion-cost", "-n", "hpa-bridge"])["spec"].clone()
}

/// A deletion-cost writer with short election timings (kube-controller-manager's are 15 s,
/// 10 s and 2 s).
async fn start_writer(cp: &ControlPlane, ns: &str) -> AdapterProcess {
    start_adapter_with(
        cp,
        &discovery(ns),
        &[
            &[
                "--write-deletion-cost",
                "--deletion-cost-lease",
                "hpa-bridge/hpa-bridge-deletion-cost",
            ][..],
            &SHORT_ELECTION,
        ]
        .concat(),
    )
    .await
}

async fn lease_identity(adapter: &AdapterProcess) -> String {
    adapter.status().await["deletionCostLease"]["identity"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Lease semantics on the real API server: of two writers, one holds the Lease and writes; the
/// other follows. Killed without a release, the holder is replaced once the Lease expires, with
/// one more transition, and the new holder writes the next change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_writer_holds_the_real_lease_and_another_takes_over_when_it_dies() {
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    let ns = cp.namespace("lease").await;
    let pods = PodPages::start(cp, &ns).await;
    let names = opted_in_web(cp, &ns, &pods, 3).await;
    for (i, name) in names.iter().enumerate() {
        web_index(&pods, name, usize::from(i == 2));
    }
    let a = start_writer(cp, &ns).await;
    let b = start_writer(cp, &ns).await;
    let (ia, ib) = (lease_identity(&a).await, lease_identity(&b).await);
    assert!(!ia.is_empty() && ia != ib, "identities {ia:?} {ib:?}");
    cp.eventually("the holder's cost", || {
        (cost_of(cp, &ns, &names[2]).as_deref() == Some("1")).then_some(())
    })
    .await;
    let spec = lease_spec(cp);
    let holder = spec["holderIdentity"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let (leader, follower, fid) = match holder.clone() {
        h if h == ia => (a, b, ib),
        h if h == ib => (b, a, ia),
        other => panic!("the Lease is held by {other:?}, neither {ia:?} nor {ib:?}"),
    };
    let status = follower.status().await["deletionCostLease"].clone();
    assert_eq!(status["leading"], false, "{status}");
    assert_eq!(status["holder"], holder.as_str(), "{status}");
    let transitions = spec["leaseTransitions"].as_i64().unwrap_or(0);

    drop(leader);
    web_index(&pods, &names[1], 2);
    cp.eventually("the new holder's cost", || {
        (cost_of(cp, &ns, &names[1]).as_deref() == Some("2")).then_some(())
    })
    .await;
    let spec = lease_spec(cp);
    assert_eq!(spec["holderIdentity"], fid.as_str(), "{spec}");
    assert_eq!(spec["leaseTransitions"], transitions + 1, "{spec}");
    assert_eq!(
        follower.status().await["deletionCostLease"]["leading"],
        true
    );
}

/// Deletion order needs the real ReplicaSet controller: with `--write-deletion-cost` and the
/// overlay's RBAC, hpa-bridge (holding the Lease) writes `controller.kubernetes.io/pod-deletion-cost`
/// on the opted-in Deployment's holding pods, and when the Deployment is scaled from 4 to 2 the
/// real controller removes the two idle pods and keeps the two that hold state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_replicaset_controller_removes_idle_pods_before_those_holding_state() {
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    let ns = cp.namespace("web").await;
    let pods = PodPages::start(cp, &ns).await;
    // The two newest pods hold state: without costs they would rank among the first to go.
    let (_, holders) = two_of_four_holding(cp, &ns, &pods, |pods, name, index| {
        web_index(pods, name, index)
    })
    .await;
    let _adapter = start_writer(cp, &ns).await;
    cp.eventually("the holding pods' deletion costs", || {
        let costs: Vec<Option<String>> = web_pods(cp, &ns)
            .iter()
            .map(|p| {
                p["metadata"]["annotations"]["controller.kubernetes.io/pod-deletion-cost"]
                    .as_str()
                    .map(String::from)
            })
            .collect();
        (costs == [None, None, Some("1".into()), Some("2".into())]).then_some(())
    })
    .await;

    cp.kubectl(&["scale", "deployment", "web", "-n", &ns, "--replicas=2"]);
    cp.wait_replicas(&ns, "deployment", "web", 2).await;
    let left = cp
        .eventually("two pods left", || {
            let left: Vec<String> = web_pods(cp, &ns).iter().map(name_of).collect();
            (left.len() == 2).then_some(left)
        })
        .await;
    assert_eq!(left, holders, "the ReplicaSet removed a pod holding state");
}

/// `args` of a `kubectl auth can-i` question about the kustomize install, asked of a chart
/// release `fullname` in its own namespace of the same name instead.
fn for_release<'a>(
    args: &[&'a str],
    fullname: &'a str,
    lease: &'a str,
) -> Vec<std::borrow::Cow<'a, str>> {
    args.iter()
        .map(|a| match *a {
            "hpa-bridge" => std::borrow::Cow::Borrowed(fullname),
            a if a.contains("hpa-bridge-deletion-cost") => {
                std::borrow::Cow::Owned(a.replace("hpa-bridge-deletion-cost", lease))
            }
            a if a.contains("hpa-bridge-memory") => std::borrow::Cow::Owned(
                a.replace("hpa-bridge-memory", &format!("{fullname}-memory")),
            ),
            a => std::borrow::Cow::Borrowed(a),
        })
        .collect()
}

/// The Helm chart applied to the real API server (release `chart-hpa-bridge` in its own
/// namespace; the APIService only with `--dry-run=server`, so the aggregator never dials the
/// chart's Service): the API server accepts every object, and its RBAC grants the service
/// account every verb `serve` uses, those of the deletion-cost writer only with
/// `deletionCost.write`, and nothing on the NEVER list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_applied_to_the_real_api_server_grants_every_verb_used_and_nothing_more() {
    const RELEASE: &str = "chart-hpa-bridge";
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    cp.apply(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {RELEASE}}}\n"
    ));
    let lease = format!("{RELEASE}-deletion-cost");
    let dir = tempfile::tempdir().unwrap();
    for write in [false, true] {
        let docs = crate::chart::render_release(
            serde_json::json!({"deletionCost": {"write": write}}),
            RELEASE,
            RELEASE,
        );
        let (apiservices, rest): (Vec<Value>, Vec<Value>) =
            docs.into_iter().partition(|d| d["kind"] == "APIService");
        assert!(!apiservices.is_empty() && !rest.is_empty());
        for (name, items, dry) in [("apiservices", apiservices, true), ("rest", rest, false)] {
            let path = dir.path().join(format!("{name}.json"));
            let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
            std::fs::write(&path, list.to_string()).unwrap();
            let mut args = vec!["apply", "-f", path.to_str().unwrap()];
            if dry {
                args.push("--dry-run=server");
            }
            cp.kubectl(&args);
        }
        let user = format!("system:serviceaccount:{RELEASE}:{RELEASE}");
        let ask = |uses: &[&[&str]]| -> Vec<(String, bool)> {
            uses.iter()
                .map(|a| {
                    let a = for_release(a, RELEASE, &lease);
                    let a: Vec<&str> = a.iter().map(|c| c.as_ref()).collect();
                    (a.join(" "), cp.can_as(&user, &a))
                })
                .collect()
        };
        let denied: Vec<String> = ask(SERVE_USES)
            .into_iter()
            .filter(|(_, yes)| !yes)
            .map(|(a, _)| a)
            .collect();
        assert!(
            denied.is_empty(),
            "write={write}: the chart denies {denied:?}"
        );
        for (a, yes) in ask(DELETION_COST_USES) {
            // Creating a Lease is the memory's too (a create cannot be narrowed to a name).
            let want = write || a.starts_with("create leases");
            assert_eq!(yes, want, "write={write}: {a}");
        }
        let granted: Vec<String> = ask(NEVER)
            .into_iter()
            .filter(|(_, yes)| *yes)
            .map(|(a, _)| a)
            .collect();
        assert!(
            granted.is_empty(),
            "write={write}: the chart grants {granted:?}"
        );
    }
}

/// The aggregator verifying hpa-bridge's serving certificate (`scripts/cluster register --ca`,
/// the APIService's `caBundle` instead of `insecureSkipTLSVerify`): with the CA that signed it,
/// the APIService is Available and answers; with another CA, it is unavailable, naming the
/// certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_aggregator_verifies_the_serving_certificate_when_given_its_ca() {
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    let ns = cp.namespace("verified").await;
    let (_ex, adapter) = static_lobby(cp, &ns).await;
    cp.register(adapter.port, "external", Some(&adapter.pki.ca_path()))
        .await;
    let api = cp.get_json(&["apiservice", "v1beta1.external.metrics.k8s.io"]);
    assert!(api["spec"]["caBundle"].is_string(), "{api}");
    assert_ne!(api["spec"]["insecureSkipTLSVerify"], true, "{api}");
    let external = external_path(&ns);
    cp.eventually("the verified answer", || {
        cp.try_kubectl(&["get", "--raw", &external])
            .ok()
            .filter(|b| value_of(b).as_deref() == Some("3"))
    })
    .await;

    use base64::Engine as _;
    let other = Pki::new("another-ca");
    let other = std::fs::read_to_string(other.ca_path()).unwrap();
    let patch = serde_json::json!({"spec": {"caBundle": base64::engine::general_purpose::STANDARD.encode(other)}});
    cp.kubectl(&[
        "patch",
        "apiservice",
        "v1beta1.external.metrics.k8s.io",
        "--type=merge",
        "-p",
        &patch.to_string(),
    ]);
    let down = cp
        .eventually("the APIService unavailable with another CA", || {
            let api = cp.get_json(&["apiservice", "v1beta1.external.metrics.k8s.io"]);
            condition(&api, "Available")
                .filter(|c| c["status"] == "False")
                .cloned()
        })
        .await;
    let message = down["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("x509") || message.contains("certificate"),
        "{down}"
    );
    // The next test registers afresh, without a caBundle field of this test's making.
    cp.kubectl(&["delete", "apiservice", "v1beta1.external.metrics.k8s.io"]);
}

/// Pod `name` of `web` holds `index` and recommends 1 replica (the recommender lives in the
/// workload).
fn web_page(name: &str, index: usize) -> String {
    format!(
        "# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{hpa_target_name=\"web\",service_instance_id=\"{name}\"}} {index}\n\
         # TYPE hpa_expect_replicas gauge\nhpa_expect_replicas{{hpa_target_name=\"web\",service_instance_id=\"{name}\"}} 1\n"
    )
}

/// A rollout of an opted-in Deployment moves its pods from one ReplicaSet to another, which
/// makes the inputs for scale-in unknown (docs/deletion-cost.md): the real HPA, at the floor of
/// the two pods holding state, does not go below it while an old pod is left, even when one
/// of them lets its state go, and follows the recommendation (1) once the rollout is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_rollout_of_an_opted_in_deployment_the_floor_holds() {
    let cp = ControlPlane::shared();
    let _cluster = cp.exclusive().await;
    let ns = cp.namespace("rollout").await;
    let pods = PodPages::start(cp, &ns).await;
    let (names, holders) = two_of_four_holding(cp, &ns, &pods, |pods, name, index| {
        pods.set(name, web_page(name, index))
    })
    .await;
    let adapter = start_writer(cp, &ns).await;
    cp.register(adapter.port, "external", None).await;
    let metric = EXTERNAL_METRIC.replace("hpa_target_name: lobby", "hpa_target_name: web");
    cp.apply(
        &hpa(&ns, 1, &metric)
            .replace("{name: lobby, namespace", "{name: web, namespace")
            .replace(
                "kind: StatefulSet, name: lobby",
                "kind: Deployment, name: web",
            ),
    );
    // Down to the floor, the highest index held; the ReplicaSet keeps the holders (their costs).
    cp.wait_replicas(&ns, "deployment", "web", 2).await;
    let left = cp
        .eventually("the two holders left", || {
            let left: Vec<String> = web_pods(cp, &ns).iter().map(name_of).collect();
            (left.len() == 2).then_some(left)
        })
        .await;
    assert_eq!(left, holders);

    // The holder of index 2 lets its state go as the rollout begins: the floor alone would
    // now allow 1, but which pod a scale-in takes during a rollout is not the costs' to decide.
    pods.set(&holders[1], web_page(&holders[1], 0));
    cp.kubectl(&[
        "patch",
        "deployment",
        "web",
        "-n",
        &ns,
        "--type=merge",
        "-p",
        // Each new pod counts as available only after 3 s, so the rollout takes a while.
        r#"{"spec":{"minReadySeconds":3,"template":{"metadata":{"annotations":{"rollout":"2"}}}}}"#,
    ]);
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut observed = 0;
    loop {
        let replicas = cp.replicas(&ns, "deployment", "web");
        let now: Vec<String> = web_pods(cp, &ns).iter().map(name_of).collect();
        for n in now.iter().filter(|n| !names.contains(n)) {
            pods.set(n, web_page(n, 0));
        }
        if !now.iter().any(|n| names.contains(n)) {
            break;
        }
        observed += 1;
        assert!(
            replicas >= 2,
            "the HPA went to {replicas} during the rollout; pods {now:?}"
        );
        assert!(
            Instant::now() < deadline,
            "the rollout did not end; pods {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(observed > 0, "the rollout was never seen in progress");
    // No pod holds state any more: down to the recommendation.
    cp.wait_replicas(&ns, "deployment", "web", 1).await;
}

/// A loopback stand-in for a Service with several ready endpoints, which kube-proxy would
/// give (there is none here): each connection goes to the first backend port that accepts it,
/// and a backend leaves the list as an endpoint leaves when its pod stops being Ready.
struct ServiceFront {
    port: u16,
    backends: std::sync::Arc<std::sync::Mutex<Vec<u16>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ServiceFront {
    async fn start(backends: &[u16]) -> ServiceFront {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = std::sync::Arc::new(std::sync::Mutex::new(backends.to_vec()));
        let list = shared.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let ports = list.lock().unwrap().clone();
                tokio::spawn(async move {
                    for p in ports {
                        if let Ok(mut out) = tokio::net::TcpStream::connect(("127.0.0.1", p)).await
                        {
                            let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                            return;
                        }
                    }
                });
            }
        });
        ServiceFront {
            port,
            backends: shared,
            task,
        }
    }

    fn set(&self, backends: &[u16]) {
        *self.backends.lock().unwrap() = backends.to_vec();
    }
}

impl Drop for ServiceFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// SIGTERM, as a rollout sends it, then wait for the process to finish its graceful shutdown.
async fn terminate(adapter: &mut AdapterProcess) {
    let pid = adapter.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    let until = Instant::now() + Duration::from_secs(30);
    while adapter.child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < until,
            "hpa-bridge did not exit after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A rolling restart of two hpa-bridge processes behind one Service (a loopback stand-in for
/// kube-proxy's, see `ServiceFront`): each old process leaves the endpoints as it is sent
/// SIGTERM and drains; the real HPA's ScalingActive never stays False longer than one sync
/// period (1 s, plus the sync that restores it), and the workload keeps its size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_of_two_adapters_fails_no_hpa_sync_for_long() {
    let mut lobby = Lobby::start(EXTERNAL_METRIC, "external", 1, 3).await;
    lobby.reaches(3).await;
    let cp = lobby.cp;
    let ns = lobby.ns.clone();
    let mut old_a = lobby.adapter.take().unwrap();
    let mut old_b = start_adapter(cp, &discovery(&ns)).await;
    let front = ServiceFront::start(&[old_a.port, old_b.port]).await;
    cp.register(front.port, "external", None).await;
    hpa_condition(&lobby, "ScalingActive", "True").await;

    let watch = {
        let ns = ns.clone();
        tokio::spawn(async move {
            // The longest run of ScalingActive=False seen, and how many samples were False.
            let (mut longest, mut false_samples, mut since) = (Duration::ZERO, 0u32, None);
            loop {
                let hpa = cp.get_json(&["hpa", "lobby", "-n", &ns]);
                let active = condition(&hpa, "ScalingActive").is_none_or(|c| c["status"] == "True");
                let replicas = cp.replicas(&ns, "statefulset", "lobby");
                assert_eq!(replicas, 3, "the rollout changed lobby's size");
                match (active, since) {
                    (false, None) => {
                        since = Some(Instant::now());
                        false_samples += 1;
                    }
                    (false, Some(t)) => {
                        false_samples += 1;
                        longest = longest.max(Instant::now() - t);
                    }
                    (true, _) => since = None,
                }
                if cp
                    .try_kubectl(&["get", "configmap", "stop-watch", "-n", &ns])
                    .is_ok()
                {
                    return (longest, false_samples);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    // Replace a, then b, each by a new process: it joins the endpoints once serving, the old
    // one leaves them and is sent SIGTERM.
    let new_a = start_adapter(cp, &discovery(&ns)).await;
    front.set(&[old_b.port, new_a.port]);
    terminate(&mut old_a).await;
    let new_b = start_adapter(cp, &discovery(&ns)).await;
    front.set(&[new_a.port, new_b.port]);
    terminate(&mut old_b).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    cp.kubectl(&["create", "configmap", "stop-watch", "-n", &ns]);
    let (longest, false_samples) = watch.await.unwrap();
    eprintln!(
        "rolling restart: ScalingActive=False in {false_samples} samples, longest run {longest:?}"
    );
    assert!(
        longest <= Duration::from_secs(2),
        "ScalingActive stayed False for {longest:?}"
    );
    lobby.adapter = Some(new_a);
    drop(new_b);
}
