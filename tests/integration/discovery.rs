//! Pod discovery against the real control plane (tests/control-plane): the StatefulSet,
//! ReplicaSet and Deployment controllers make the pods, the stand-in kubelet runs them on
//! their own loopback addresses, where `PodPages` serves each one's exporter, and hpa-bridge
//! follows them through kube-runtime watches with manifests/base's service account. What the
//! adapter asked the API server is read from its audit log.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::control_plane::{ControlPlane, PodPages};
use crate::common::*;

/// The base's service account, as the audit log names it.
const ADAPTER_USER: &str = "system:serviceaccount:hpa-bridge:hpa-bridge";

/// Discovery of the pods labelled `tier` in `namespaces` (a YAML list; `[]` is every
/// namespace), copying their `app` label.
fn config(namespaces: &str, tier: &str) -> String {
    format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n  kubernetes:\n    namespaces: {namespaces}\n    podSelector: \"tier={tier}\"\n    copyLabels: [app]\n"
    )
}

/// hpa-bridge with the base's service account and no authentication of its own callers, so
/// the test asks it directly.
async fn start_adapter(cp: &ControlPlane, namespaces: &str, tier: &str) -> AdapterProcess {
    let kubeconfig = cp.adapter_kubeconfig();
    AdapterProcess::start_with(
        &config(namespaces, tier),
        &["--kubeconfig", kubeconfig.to_str().unwrap(), "--no-memory"],
    )
    .await
}

/// A StatefulSet whose pods carry `app: name`, `tier` and the exporters' annotations.
fn statefulset(ns: &str, name: &str, replicas: u32, tier: &str, pods: &PodPages) -> String {
    format!(
        "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  replicas: {replicas}\n  serviceName: {name}\n  podManagementPolicy: Parallel\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata:\n      labels: {{app: {name}, tier: {tier}}}\n      annotations: {}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: app, image: app.invalid/{name}:1}}]\n",
        pods.annotations()
    )
}

fn value_is(expected: &str) -> impl Fn(u16, &Value) -> bool + '_ {
    move |c, v| c == 200 && single_value(v).as_deref() == Some(expected)
}

async fn status_until(adapter: &AdapterProcess, what: &str, check: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let status = adapter.status().await;
        if check(&status) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; /status: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The names of the pods labelled `app` in `ns`, once there are `want` of them Running.
async fn running_pods(cp: &ControlPlane, ns: &str, app: &str, want: usize) -> Vec<String> {
    cp.eventually(&format!("{want} pods of {app} running"), || {
        let list = cp.get_json(&["pods", "-n", ns, "-l", &format!("app={app}")]);
        let names: Vec<String> = list["items"]
            .as_array()?
            .iter()
            .filter(|p| {
                p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
            })
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        (names.len() == want).then_some(names)
    })
    .await
}

/// Pods come, fail, go and come again through the real controllers, and the floor and the
/// target follow: the labels copied from the pod and its workload, a Pending pod never
/// scraped, a failing pod's index kept while it exists, a scaled-in pod's index retired, and
/// on scale-out the target held at `spec.replicas` from the watch cache (never read from the
/// API server on the request path: the audit log holds no scale request of the adapter)
/// while a new pod is not scraped yet.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_come_and_go_and_the_floor_follows() {
    let cp = ControlPlane::shared();
    let ns = cp.namespace("discovery").await;
    let pods = PodPages::start(cp, &ns).await;
    for i in 0..3u64 {
        let name = format!("lobby-{i}");
        pods.set(&name, index_of("lobby", &name, i + 1));
    }
    pods.set("lobby-ctl-0", expect_of("lobby", 2));
    // A never-scraped pod of another workload (chat-0 serves 404) must not make lobby's
    // floor unknown.
    for (name, replicas) in [("lobby", 3), ("lobby-ctl", 1), ("chat", 1)] {
        cp.apply(&statefulset(&ns, name, replicas, "game", &pods));
    }
    // Not Running (bound to a node no kubelet runs): never a target.
    cp.apply(&format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: lobby-9\n  namespace: {ns}\n  labels: {{app: lobby, tier: game}}\n  annotations: {}\nspec:\n  nodeName: no-such-node\n  containers: [{{name: app, image: app.invalid/lobby:1}}]\n",
        pods.annotations()
    ));
    running_pods(cp, &ns, "lobby", 3).await;

    let adapter = start_adapter(cp, &format!("[{ns}]"), "game").await;
    let lobby = "hpa_target_name=lobby";
    adapter
        .eventually(&ns, "hpa_stateful_floor", lobby, "floor 3", value_is("3"))
        .await;
    adapter
        .eventually(&ns, "hpa_target_replicas", lobby, "target 3", value_is("3"))
        .await;
    // Samples carry the pod's labels: a selector on them scopes the same workload.
    adapter
        .eventually(
            &ns,
            "hpa_stateful_floor",
            "workload_kind=StatefulSet,workload_name=lobby,app=lobby",
            "floor 3 via pod labels",
            value_is("3"),
        )
        .await;
    let status = adapter.status().await;
    let id = format!("{ns}/lobby-1");
    let t = status_target(&status, &id).unwrap_or_else(|| panic!("{status}"));
    assert_eq!(t["labels"]["namespace"], ns.as_str());
    assert_eq!(t["labels"]["pod"], "lobby-1");
    assert_eq!(t["labels"]["app"], "lobby");
    assert_eq!(t["labels"]["workload_kind"], "StatefulSet");
    assert_eq!(t["labels"]["workload_name"], "lobby");
    assert!(
        t["labels"].get("tier").is_none(),
        "only copyLabels are copied"
    );
    assert_eq!(t["workload"]["kind"], "StatefulSet");
    let ip = cp.get_json(&["pod", "lobby-1", "-n", &ns])["status"]["podIP"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(t["url"], format!("http://{ip}:{}/metrics", pods.port));
    assert!(
        status_target(&status, &format!("{ns}/lobby-9")).is_none(),
        "Pending pod scraped"
    );

    // lobby-2 fails its scrapes: its pod still exists, so its index is kept.
    pods.set_status("lobby-2", 500);
    let failing = format!("{ns}/lobby-2");
    status_until(&adapter, "lobby-2 failing", |s| {
        status_target(s, &failing).is_some_and(|t| t["consecutiveFailures"].as_u64() >= Some(2))
    })
    .await;
    let (code, v) = adapter.metric(&ns, "hpa_stateful_floor", lobby).await;
    assert_eq!((code, single_value(&v).as_deref()), (200, Some("3")));

    // Scaled in, the StatefulSet controller deletes lobby-2: its index is retired.
    cp.kubectl(&["scale", "statefulset", "lobby", "-n", &ns, "--replicas=2"]);
    adapter
        .eventually(
            &ns,
            "hpa_stateful_floor",
            lobby,
            "floor 2 after scale-in",
            value_is("2"),
        )
        .await;
    status_until(&adapter, "lobby-2 gone", |s| {
        status_target(s, &failing).is_none()
    })
    .await;

    // Scale-out to 5: the new pods are up but not scraped yet (503). The floor is unknown,
    // and the target holds at the workload's spec.replicas from the watch cache, so the HPA
    // neither shrinks it nor loses its scale-out.
    for name in ["lobby-2", "lobby-3", "lobby-4"] {
        pods.set(name, "starting\n");
        pods.set_status(name, 503);
    }
    cp.kubectl(&["scale", "statefulset", "lobby", "-n", &ns, "--replicas=5"]);
    let floor = adapter
        .eventually(
            &ns,
            "hpa_stateful_floor",
            lobby,
            "floor incomplete",
            |c, v| {
                c == 503
                    && v["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(&format!("{ns}/lobby-3")))
            },
        )
        .await;
    assert_eq!(floor["reason"], "ServiceUnavailable", "{floor}");
    adapter
        .eventually(
            &ns,
            "hpa_target_replicas",
            lobby,
            "target at spec.replicas 5",
            value_is("5"),
        )
        .await;
    let status = adapter.status().await;
    let reason = status_row(&status, "hpa_target_replicas", lobby)["answer"]["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(reason.contains("current spec.replicas 5"), "{reason}");
    let scale_reads: Vec<String> = cp
        .audited(ADAPTER_USER)
        .into_iter()
        .filter(|e| e.subresource == "scale" && e.uri.contains(&format!("/namespaces/{ns}/")))
        .map(|e| e.uri)
        .collect();
    assert!(
        scale_reads.is_empty(),
        "the scale subresource was read: {scale_reads:?}"
    );

    // The new pods report: the floor is complete again.
    pods.set("lobby-2", index_of("lobby", "lobby-2", 0));
    pods.set("lobby-3", index_of("lobby", "lobby-3", 4));
    pods.set("lobby-4", index_of("lobby", "lobby-4", 0));
    adapter
        .eventually(&ns, "hpa_stateful_floor", lobby, "floor 4", value_is("4"))
        .await;
    adapter
        .eventually(&ns, "hpa_target_replicas", lobby, "target 4", value_is("4"))
        .await;
}

/// A StatefulSet whose ordinals start at 3 has pods shard-3 and shard-4, exporting indices 4
/// and 5: the floor is the count of pods up to the highest, 5 - 3 = 2; beside it one starting
/// at 0 gives its raw index. Discovery over every namespace (`namespaces: []`) lists and
/// watches cluster-wide, as the audit log shows of the adapter's own service account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statefulset_ordinals_start_offsets_the_floor() {
    let cp = ControlPlane::shared();
    let ns = cp.namespace("ordinals").await;
    let pods = PodPages::start(cp, &ns).await;
    // The pods of this test only, out of every namespace's.
    let tier = ns.clone();
    for (name, index) in [
        ("shard-3", 4),
        ("shard-4", 5),
        ("plain-0", 1),
        ("plain-1", 2),
    ] {
        let workload = name.rsplit_once('-').unwrap().0;
        pods.set(name, index_of(workload, name, index));
    }
    cp.apply(&statefulset(&ns, "shard", 2, &tier, &pods).replace(
        "  serviceName: shard\n",
        "  serviceName: shard\n  ordinals: {start: 3}\n",
    ));
    cp.apply(&statefulset(&ns, "plain", 2, &tier, &pods));
    running_pods(cp, &ns, "shard", 2).await;

    // A service account of its own bound to the base's discovery role, so the audit log
    // tells this adapter's requests from every other test's.
    cp.kubectl(&["create", "serviceaccount", "everywhere", "-n", &ns]);
    cp.kubectl(&[
        "create",
        "clusterrolebinding",
        &format!("everywhere-{ns}"),
        "--clusterrole=hpa-bridge:discovery",
        &format!("--serviceaccount={ns}:everywhere"),
    ]);
    let kubeconfig = cp.service_account_kubeconfig(&ns, "everywhere");
    let adapter = AdapterProcess::start_with(
        &config("[]", &tier),
        &["--kubeconfig", kubeconfig.to_str().unwrap(), "--no-memory"],
    )
    .await;
    let v = adapter
        .eventually(
            &ns,
            "hpa_stateful_floor",
            "hpa_target_name=shard",
            "floor 5-3",
            value_is("2"),
        )
        .await;
    assert_eq!(v["items"][0]["metricName"], "hpa_stateful_floor");
    let status = adapter.status().await;
    let reason = |selector: &str| {
        status_row(&status, "hpa_stateful_floor", selector)["answer"]["reason"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(
        reason("hpa_target_name=shard").contains("minus ordinals start 3"),
        "{status}"
    );
    adapter
        .eventually(
            &ns,
            "hpa_stateful_floor",
            "hpa_target_name=plain",
            "floor 2",
            value_is("2"),
        )
        .await;
    let status = adapter.status().await;
    let plain = status_row(&status, "hpa_stateful_floor", "hpa_target_name=plain")["answer"]
        ["reason"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!plain.contains("minus ordinals start"), "{plain}");

    // Answers follow the lists; each watch starts after its list, and the API server logs it
    // once its response starts, which on a loaded machine may come after the answers.
    let audited = || -> Vec<String> {
        cp.audited(&format!("system:serviceaccount:{ns}:everywhere"))
            .iter()
            .map(|e| format!("{} {}", e.verb, e.uri))
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut uris = audited();
    let watched = |uris: &[String]| {
        [
            "watch /api/v1/pods?",
            "watch /apis/autoscaling/v2/horizontalpodautoscalers?",
        ]
        .iter()
        .all(|w| uris.iter().any(|u| u.starts_with(w)))
    };
    while !watched(&uris) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        uris = audited();
    }
    // The pod selector goes to the API server, which filters there.
    let selected = format!("labelSelector=tier%3D{tier}");
    assert!(
        uris.iter()
            .any(|u| u.starts_with("list /api/v1/pods?") && u.contains(&selected)),
        "{uris:#?}"
    );
    assert!(
        uris.iter().any(|u| u.starts_with("watch /api/v1/pods?")),
        "{uris:#?}"
    );
    // Every list and watch is cluster-wide, the HPAs' too; the only namespaced requests are the
    // HPA predictions' reads of each predicted HPA's target scale (other tests' HPAs here).
    assert!(
        uris.iter()
            .any(|u| u.starts_with("watch /apis/autoscaling/v2/horizontalpodautoscalers?")),
        "{uris:#?}"
    );
    assert!(
        !uris.iter().any(
            |u| u.contains("/namespaces/") && !(u.starts_with("get ") && u.ends_with("/scale"))
        ),
        "namespaced requests with namespaces: []: {uris:#?}"
    );
}

/// A Deployment promises no deletion order, so a floor over it is served with a warning,
/// logged once and shown in /status every time. Its pods and ReplicaSet come from the real
/// Deployment and ReplicaSet controllers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_floor_warns_once_in_the_log_and_always_in_status() {
    let cp = ControlPlane::shared();
    let ns = cp.namespace("deployment-floor").await;
    let pods = PodPages::start(cp, &ns).await;
    cp.apply(&format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  replicas: 2\n  selector: {{matchLabels: {{app: web}}}}\n  template:\n    metadata:\n      labels: {{app: web, tier: game}}\n      annotations: {}\n    spec:\n      terminationGracePeriodSeconds: 1\n      containers: [{{name: app, image: app.invalid/web:1}}]\n",
        pods.annotations()
    ));
    let mut names = running_pods(cp, &ns, "web", 2).await;
    names.sort();
    for (i, name) in names.iter().enumerate() {
        pods.set(name, index_of("web", name, i as u64 + 1));
    }
    let adapter = start_adapter(cp, &format!("[{ns}]"), "game").await;
    let web = "hpa_target_name=web";
    adapter
        .eventually(&ns, "hpa_stateful_floor", web, "floor 2", value_is("2"))
        .await;
    for _ in 0..3 {
        let (code, _) = adapter.metric(&ns, "hpa_stateful_floor", web).await;
        assert_eq!(code, 200);
    }
    let status = adapter.status().await;
    let t =
        status_target(&status, &format!("{ns}/{}", names[0])).unwrap_or_else(|| panic!("{status}"));
    assert_eq!(t["labels"]["workload_kind"], "Deployment");
    assert_eq!(t["labels"]["workload_name"], "web");
    let floor = status_row(&status, "hpa_stateful_floor", web);
    let warnings = floor["answer"]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{floor}");
    assert!(
        warnings[0]
            .as_str()
            .unwrap()
            .contains(&format!("Deployment {ns}/web")),
        "{floor}"
    );
    // /status asked again (it re-evaluates every answer): still one log line.
    let _ = adapter.status().await;
    let log = adapter.log();
    assert_eq!(
        log.matches("promises no deletion order").count(),
        1,
        "the Deployment warning must be logged exactly once:\n{log}"
    );
}

/// Discovery's counts of who worked the pods' facts out, once unchanged for `quiet`.
async fn settled(
    discovery: &hpa_bridge_sources::source::discovery::Discovery,
    quiet: Duration,
) -> hpa_bridge_sources::source::discovery::PodFactsBuilds {
    let mut last = discovery.pod_facts_builds();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            Instant::now() < deadline,
            "the counts never settled: {last:?}"
        );
        tokio::time::sleep(quiet).await;
        let now = discovery.pod_facts_builds();
        if now == last {
            return last;
        }
        last = now;
    }
}

/// The pods' facts that Object answers and floors read (`Cluster::workload_pods`) are worked
/// out again after each change by discovery's publisher, off the async workers, once anything
/// has asked for them; an answer after a change then finds them current instead of going over
/// every pod itself. In-process: `Discovery` against the real API server, its counters
/// telling who worked them out; the change is a pod the StatefulSet controller adds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pods_facts_are_worked_out_ahead_of_the_answers_once_asked_for() {
    use hpa_bridge_rules::cluster::{Cluster, WorkloadRef};
    use hpa_bridge_sources::source::discovery::{Discovery, PodFactsBuilds};

    let cp = ControlPlane::shared();
    let ns = cp.namespace("pod-facts").await;
    let pods = PodPages::start(cp, &ns).await;
    cp.apply(&statefulset(&ns, "lobby", 2, "game", &pods));
    running_pods(cp, &ns, "lobby", 2).await;
    let client = crate::common::control_plane::client(cp).await;
    let discovery_config =
        serde_json::from_value(serde_json::json!({"namespaces": [ns.clone()]})).unwrap();
    let store = hpa_bridge_store::store::StoreWriter::default();
    let discovery = Discovery::start(client, discovery_config, store, Vec::new());
    tokio::time::timeout(Duration::from_secs(30), discovery.wait_synced())
        .await
        .expect("discovery synced against the API server");
    let lobby = WorkloadRef {
        kind: "StatefulSet".into(),
        namespace: ns.clone(),
        name: "lobby".into(),
    };
    let names = |d: &Discovery| -> Vec<String> {
        d.workload_pods(&lobby).unwrap().keys().cloned().collect()
    };
    // Until something asks, the publisher does not work them out.
    assert_eq!(discovery.pod_facts_builds(), PodFactsBuilds::default());
    assert_eq!(names(&discovery), ["lobby-0", "lobby-1"]);
    // The publisher may be between rounds of the initial sync's events and work them out
    // beside this first ask, so later counts are compared with these, once they settle.
    let before = settled(&discovery, Duration::from_millis(200)).await;
    assert!(before.on_ask + before.ahead >= 1, "{before:?}");
    // A new pod: the publisher works the facts out again before the next ask. The pod
    // changes several times on its way to Running (created, bound, given an address, Ready);
    // nothing asks until it is Running and the counts settle.
    cp.kubectl(&["scale", "statefulset", "lobby", "-n", &ns, "--replicas=3"]);
    running_pods(cp, &ns, "lobby", 3).await;
    let after = settled(&discovery, Duration::from_millis(500)).await;
    assert!(
        after.ahead > before.ahead,
        "the publisher never worked out the facts: {before:?} then {after:?}"
    );
    assert_eq!(names(&discovery), ["lobby-0", "lobby-1", "lobby-2"]);
    assert_eq!(
        discovery.pod_facts_builds().on_ask,
        before.on_ask,
        "the answer after the change worked the facts out itself"
    );
}
