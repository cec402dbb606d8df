//! Discovery and the deletion-cost writer under faults the real API server cannot be made
//! to produce on demand, against the loopback stand-in `kubeapi` (list, watch, merge patch,
//! Leases, over real HTTPS): a watch delivering pods before their ReplicaSet or StatefulSet,
//! a PATCH that hangs or is refused, a Lease write refused for one caller, a watch ended with
//! 410 Gone. Each test names its fault. Everything the real control plane can serve runs there
//! (discovery.rs, cluster.rs).

use hpa_bridge_kit::exporter::{Behaviour, TestExporter};

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentSpec, ReplicaSet, ReplicaSetSpec, StatefulSet, StatefulSetOrdinals,
    StatefulSetSpec,
};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, Pod, PodSpec, PodStatus, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use crate::common::*;
use crate::kubeapi::KubeApi;

const NS: &str = "games";

fn labels(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
    Some(
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    )
}

fn template(app: &str) -> (LabelSelector, PodTemplateSpec) {
    (
        LabelSelector {
            match_labels: labels(&[("app", app)]),
            ..Default::default()
        },
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: labels(&[("app", app)]),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "app".into(),
                    image: Some("registry.example/app:1".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        },
    )
}

fn statefulset(name: &str, replicas: i32, ordinals_start: Option<i32>) -> StatefulSet {
    let (selector, template) = template(name);
    StatefulSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector,
            service_name: Some(name.into()),
            template,
            ordinals: ordinals_start.map(|s| StatefulSetOrdinals { start: Some(s) }),
            ..Default::default()
        }),
        status: None,
    }
}

fn owner(kind: &str, name: &str) -> OwnerReference {
    OwnerReference {
        api_version: "apps/v1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: format!("uid-{kind}-{name}"),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// A Running pod at 127.0.0.1 whose annotations point at `path` on the exporter.
fn pod(name: &str, app: &str, owner_ref: OwnerReference, ex: &TestExporter, path: &str) -> Pod {
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            labels: labels(&[("app", app), ("tier", "game")]),
            annotations: labels(&[
                ("prometheus.io/scrape", "true"),
                ("prometheus.io/port", &ex.addr.port().to_string()),
                ("prometheus.io/path", path),
            ]),
            owner_references: Some(vec![owner_ref]),
            ..Default::default()
        },
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "app".into(),
                image: Some("registry.example/app:1".into()),
                ports: Some(vec![ContainerPort {
                    name: Some("metrics".into()),
                    container_port: ex.addr.port() as i32,
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            pod_ip: Some("127.0.0.1".into()),
            ..Default::default()
        }),
    }
}

fn config(namespaces: &str) -> String {
    format!(
        "scrape:\n  interval: 200ms\n  timeout: 200ms\n  staleAfter: 1500ms\n  maxBodyBytes: 65536\n  kubernetes:\n    namespaces: {namespaces}\n    podSelector: \"tier=game\"\n    copyLabels: [app]\n"
    )
}

async fn start_adapter(api: &KubeApi, namespaces: &str) -> AdapterProcess {
    let kubeconfig = api.kubeconfig();
    AdapterProcess::start_with(
        &config(namespaces),
        &["--kubeconfig", kubeconfig.to_str().unwrap()],
    )
    .await
}

fn value_is(expected: &str) -> impl Fn(u16, &serde_json::Value) -> bool + '_ {
    move |c, v| c == 200 && single_value(v).as_deref() == Some(expected)
}

/// Why `/status` says `metric` for `selector` has its answer.
async fn answer_reason(adapter: &AdapterProcess, metric: &str, selector: &str) -> String {
    let status = adapter.status().await;
    status_row(&status, metric, selector)["answer"]["reason"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Why `/status` says `hpa_target_replicas` for `selector` has its answer.
async fn target_reason(adapter: &AdapterProcess, selector: &str) -> String {
    answer_reason(adapter, "hpa_target_replicas", selector).await
}

/// Once `hpa_stateful_floor` for `selector` is refused (503), why.
async fn incomplete_floor(adapter: &AdapterProcess, selector: &str) -> String {
    let refused = |c: u16, _: &serde_json::Value| c == 503;
    adapter
        .eventually(
            NS,
            "hpa_stateful_floor",
            selector,
            "an incomplete floor",
            refused,
        )
        .await;
    answer_reason(adapter, "hpa_stateful_floor", selector).await
}

fn opted_in_deployment(name: &str, annotated: bool, rs: &str) -> (Deployment, ReplicaSet) {
    let (selector, template) = template(name);
    let annotations = annotated.then(|| {
        BTreeMap::from([(
            "hpa-bridge.io/deletion-cost".to_string(),
            "stateful-index".to_string(),
        )])
    });
    let deployment = Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            annotations,
            ..Default::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(4),
            selector: selector.clone(),
            template: template.clone(),
            ..Default::default()
        }),
        status: None,
    };
    let replicaset = ReplicaSet {
        metadata: ObjectMeta {
            name: Some(rs.into()),
            namespace: Some(NS.into()),
            owner_references: Some(vec![owner("Deployment", name)]),
            ..Default::default()
        },
        spec: Some(ReplicaSetSpec {
            replicas: Some(4),
            selector,
            template: Some(template),
            ..Default::default()
        }),
        status: None,
    };
    (deployment, replicaset)
}

/// A pod of `rs` whose Ready condition is `ready`.
fn ready_pod(name: &str, app: &str, rs: &str, ex: &TestExporter, ready: bool) -> Pod {
    let mut p = pod(
        name,
        app,
        owner("ReplicaSet", rs),
        ex,
        &format!("/pods/{name}"),
    );
    let status = p.status.as_mut().unwrap();
    status.conditions = Some(vec![k8s_openapi::api::core::v1::PodCondition {
        type_: "Ready".into(),
        status: if ready { "True" } else { "False" }.into(),
        ..Default::default()
    }]);
    p
}

fn cost_of(api: &KubeApi, pod: &str) -> Option<String> {
    api.object("pods", NS, pod)?["metadata"]["annotations"]
        ["controller.kubernetes.io/pod-deletion-cost"]
        .as_str()
        .map(String::from)
}

/// The Deployment `web` (opted in; pods a..d with indices 0, 1, 2, 0) and `other` (not opted
/// in; one pod with index 3).
fn opted_in_web_and_other(api: &KubeApi, ex: &TestExporter) {
    let (web, web_rs) = opted_in_deployment("web", true, "web-7c9d");
    let (other, other_rs) = opted_in_deployment("other", false, "other-5f5f");
    api.apply(&web);
    api.apply(&web_rs);
    api.apply(&other);
    api.apply(&other_rs);
    let pods = [
        ("web-7c9d-a", 0),
        ("web-7c9d-b", 1),
        ("web-7c9d-c", 2),
        ("web-7c9d-d", 0),
    ];
    for (name, index) in pods {
        ex.page(&format!("/pods/{name}"), index_of("web", name, index));
        api.apply(&ready_pod(name, "web", "web-7c9d", ex, true));
    }
    ex.page("/pods/other-5f5f-a", index_of("other", "other-5f5f-a", 3));
    api.apply(&ready_pod("other-5f5f-a", "other", "other-5f5f", ex, true));
}

/// An adapter watching `games` through `kubeconfig` that writes deletion costs, with `more`
/// flags.
async fn start_writing_costs_with(kubeconfig: &std::path::Path, more: &[&str]) -> AdapterProcess {
    let mut args = vec![
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
        "--write-deletion-cost",
        "--deletion-cost-qps",
        "50",
        // The stand-in keeps one Lease record per name it is asked about, and these tests
        // count the deletion-cost Lease's writes: the memory's Lease stays out of them.
        "--no-memory",
    ];
    args.extend_from_slice(more);
    AdapterProcess::start_with(&config("[games]"), &args).await
}

/// The same, alone (no lease).
async fn start_writing_costs(api: &KubeApi) -> AdapterProcess {
    start_writing_costs_with(&api.kubeconfig(), &[]).await
}

/// A Deployment's pods whose ReplicaSet the watch does not hold yet are attributed to the
/// ReplicaSet, and a plain floor over them (the highest index, 1) would be below the
/// Deployment's count of holding pods (2): the floor stays incomplete until the ReplicaSet is
/// known and the pods are followed to their Deployment. Fault: a watch delivering pods before
/// their ReplicaSet, which the real controllers and garbage collector never leave standing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_of_a_replica_set_not_yet_known_hold_the_floor_incomplete() {
    let ex = TestExporter::start().await;
    let api = KubeApi::start().await;
    let (web, web_rs) = opted_in_deployment("web", true, "web-9x9x");
    api.apply(&web);
    for (name, index) in [("web-9x9x-a", 1), ("web-9x9x-b", 1), ("web-9x9x-c", 0)] {
        ex.page(&format!("/pods/{name}"), index_of("web", name, index));
        api.apply(&ready_pod(name, "web", "web-9x9x", &ex, true));
    }
    let adapter = start_writing_costs(&api).await;
    let web_sel = "hpa_target_name=web";
    let why = incomplete_floor(&adapter, web_sel).await;
    assert!(
        why.contains("ReplicaSet games/web-9x9x") && why.contains("not yet followed"),
        "{why}"
    );
    api.apply(&web_rs);
    adapter
        .eventually(
            NS,
            "hpa_stateful_floor",
            web_sel,
            "the count of holding pods once the ReplicaSet is known",
            value_is("2"),
        )
        .await;
}

/// The deletion-cost writer against the loopback API server (it applies JSON merge patches to
/// its pod objects and watchers see them): only the opted-in Deployment's pods are patched, once per change, with field manager hpa-bridge;
/// its floor counts the holding pods once the watch shows every cost, and holds while a
/// holding pod is not Ready or a patch is refused. Faults: a Ready condition flipped under a
/// running kubelet, every PATCH refused on demand, an outage with 410 Gone, a new ReplicaSet
/// with replicas and no pods (the real ones are in cluster.rs: costs written, the ReplicaSet
/// controller's choice, a rollout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_opted_in_deployment_gets_costs_written_and_a_floor_of_its_holding_pods() {
    let ex = TestExporter::start().await;
    let api = KubeApi::start().await;
    opted_in_web_and_other(&api, &ex);
    let adapter = start_writing_costs(&api).await;
    let web_sel = "hpa_target_name=web";
    adapter
        .eventually(
            NS,
            "hpa_stateful_floor",
            web_sel,
            "floor 2 (two holding pods)",
            value_is("2"),
        )
        .await;
    assert_eq!(cost_of(&api, "web-7c9d-b").as_deref(), Some("1"));
    assert_eq!(cost_of(&api, "web-7c9d-c").as_deref(), Some("2"));
    // Idle pods without an annotation already rank first (absent is 0): nothing to write.
    assert_eq!(cost_of(&api, "web-7c9d-a"), None);
    // Several intervals later, still one patch per holding pod: values are written when they change.
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let patches = api.patches();
    let mut patched: Vec<&str> = patches.iter().map(|p| p.name.as_str()).collect();
    patched.sort();
    assert_eq!(patched, ["web-7c9d-b", "web-7c9d-c"], "{patches:?}");
    for p in &patches {
        assert_eq!(p.field_manager.as_deref(), Some("hpa-bridge"), "{p:?}");
        assert_eq!(
            p.patch,
            serde_json::json!({"metadata": {"annotations": {"controller.kubernetes.io/pod-deletion-cost": cost_of(&api, &p.name).unwrap()}}})
        );
    }
    let (_, metrics) = adapter.plain_get("/metrics").await;
    assert!(
        metrics.contains("hpa_bridge_deletion_cost_patches_total{result=\"success\"} 2"),
        "{metrics}"
    );
    // The Deployment that did not opt in keeps its floor warning and is never written.
    let (code, body) = adapter
        .metric(NS, "hpa_stateful_floor", "hpa_target_name=other")
        .await;
    assert_eq!(
        (code, single_value(&body).as_deref()),
        (200, Some("3")),
        "{body}"
    );

    // A pod hands its state over: its cost follows to 0 and the floor to 1.
    ex.page("/pods/web-7c9d-c", index_of("web", "web-7c9d-c", 0));
    adapter
        .eventually(
            NS,
            "hpa_stateful_floor",
            web_sel,
            "floor 1 after a release",
            value_is("1"),
        )
        .await;
    assert_eq!(cost_of(&api, "web-7c9d-c").as_deref(), Some("0"));

    // A holding pod that is not Ready would be deleted before any Ready one: the floor holds.
    api.apply(&ready_pod("web-7c9d-b", "web", "web-7c9d", &ex, false));
    let reason = incomplete_floor(&adapter, web_sel).await;
    assert!(
        reason.contains("web-7c9d-b holds state (index 1) but is not Ready"),
        "{reason}"
    );
    let mut b = ready_pod("web-7c9d-b", "web", "web-7c9d", &ex, true);
    b.metadata.annotations.as_mut().unwrap().insert(
        "controller.kubernetes.io/pod-deletion-cost".into(),
        "1".into(),
    );
    api.apply(&b);
    adapter
        .eventually(
            NS,
            "hpa_stateful_floor",
            web_sel,
            "floor 1 once Ready",
            value_is("1"),
        )
        .await;

    // A refused patch is counted, retried with backoff, and the floor holds meanwhile.
    api.fail_patches(Some(403));
    ex.page("/pods/web-7c9d-d", index_of("web", "web-7c9d-d", 3));
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, metrics) = adapter.plain_get("/metrics").await;
        if metrics.contains("hpa_bridge_deletion_cost_patches_total{result=\"forbidden\"}") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no forbidden patch counted: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let reason = incomplete_floor(&adapter, web_sel).await;
    assert!(
        reason.contains("web-7c9d-d's deletion cost is absent in the watch, not its index 3"),
        "{reason}"
    );
    assert!(
        !api.patches().iter().any(|p| p.name.starts_with("other")),
        "a Deployment that did not opt in was patched"
    );

    // While the watches fail, Ready and the costs are of unknown age: the floor holds.
    api.fail_patches(None);
    ex.page("/pods/web-7c9d-d", index_of("web", "web-7c9d-d", 0));
    adapter
        .eventually(
            NS,
            "hpa_stateful_floor",
            web_sel,
            "floor 1 again",
            value_is("1"),
        )
        .await;

    // A rollout's new ReplicaSet has replicas before any of its pods exist: a scale-down
    // would be split between the two by size, so the floor holds until the new one is at 0.
    let (_, mut new_rs) = opted_in_deployment("web", true, "web-8e8e");
    new_rs.spec.as_mut().unwrap().replicas = Some(1);
    api.apply(&new_rs);
    let reason = incomplete_floor(&adapter, web_sel).await;
    assert!(
        reason.contains(
            "2 ReplicaSets of Deployment games/web have replicas (web-7c9d has 4, web-8e8e has 1)"
        ),
        "{reason}"
    );
    new_rs.spec.as_mut().unwrap().replicas = Some(0);
    api.apply(&new_rs);
    adapter
        .eventually(
            NS,
            "hpa_stateful_floor",
            web_sel,
            "floor 1 with the new ReplicaSet at 0",
            value_is("1"),
        )
        .await;
    api.begin_outage();
    api.break_watches();
    let reason = incomplete_floor(&adapter, web_sel).await;
    assert!(
        reason.contains("a watch has not synced, or is failing"),
        "{reason}"
    );
    api.end_outage();
}

const LEASE_NS: &str = "hpa-bridge";
const LEASE: &str = "hpa-bridge-deletion-cost";
/// Short election timings (kube-controller-manager's are 15 s, 10 s and 2 s).
const LEASE_DURATION: Duration = Duration::from_secs(2);
const RENEW_DEADLINE: Duration = Duration::from_millis(1500);

/// A deletion-cost writer replica with short lease timings, whose API requests the server
/// records as `caller`'s.
async fn start_writer(api: &KubeApi, caller: &str) -> AdapterProcess {
    let lease = format!("{LEASE_NS}/{LEASE}");
    start_writing_costs_with(
        &api.kubeconfig_as(caller),
        &[&["--deletion-cost-lease", &lease][..], &SHORT_ELECTION].concat(),
    )
    .await
}

/// Poll `check` every 50 ms until it gives a value; fail after 15 s.
async fn until<T>(what: &str, check: impl Fn() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn lease_holder(api: &KubeApi) -> Option<String> {
    api.lease_object(LEASE_NS, LEASE)?["spec"]["holderIdentity"]
        .as_str()
        .map(String::from)
}

/// The lease as a replica's `/status` shows it.
async fn lease_status(adapter: &AdapterProcess) -> serde_json::Value {
    adapter.status().await["deletionCostLease"].clone()
}

/// Two writers, each with its own caller name: once one holds the lease, (leader, follower)
/// with their caller names and identities.
async fn elect(
    api: &KubeApi,
    a: AdapterProcess,
    b: AdapterProcess,
) -> (
    (AdapterProcess, &'static str, String),
    (AdapterProcess, &'static str, String),
) {
    let holder = until("a lease holder", || lease_holder(api)).await;
    let id_a = lease_status(&a).await["identity"]
        .as_str()
        .unwrap()
        .to_string();
    let id_b = lease_status(&b).await["identity"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(id_a, id_b);
    if holder == id_a {
        ((a, "a", id_a), (b, "b", id_b))
    } else {
        assert_eq!(holder, id_b);
        ((b, "b", id_b), (a, "a", id_a))
    }
}

/// Lease writes by `caller` that the server applied with `holder` in them.
fn applied_writes(
    api: &KubeApi,
    caller: &str,
    holder: &str,
) -> Vec<hpa_bridge_kit::kube_api::LeaseWrite> {
    api.lease_writes()
        .into_iter()
        .filter(|w| w.caller == caller && w.holder == holder && (200..300).contains(&w.code))
        .collect()
}

/// One writer per workload: two replicas with `--write-deletion-cost` against one
/// API server. Exactly one holds the Lease and only it patches; killed without a release, the
/// other takes the lease only once it has seen the same record for the lease duration, then
/// writes. The stand-in records every Lease write with its caller and time, which shows the
/// follower waiting out the duration; the takeover itself also runs on the real API server
/// (cluster.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_writes_deletion_costs_and_another_takes_over_only_once_the_lease_expires() {
    let ex = TestExporter::start().await;
    let api = KubeApi::start().await;
    opted_in_web_and_other(&api, &ex);
    let a = start_writer(&api, "a").await;
    let b = start_writer(&api, "b").await;
    until("the holding pods' costs", || {
        (cost_of(&api, "web-7c9d-b").as_deref() == Some("1")
            && cost_of(&api, "web-7c9d-c").as_deref() == Some("2"))
        .then_some(())
    })
    .await;
    let ((leader, lc, lid), (follower, fc, fid)) = elect(&api, a, b).await;
    // Several retry periods and scrape intervals later, still one writer.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let patches = api.patches();
    assert!(
        patches.iter().all(|p| p.caller == lc),
        "only the holder {lc} patches: {patches:?}"
    );
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert_eq!(lease_holder(&api).as_deref(), Some(lid.as_str()));
    let (ls, fs) = (lease_status(&leader).await, lease_status(&follower).await);
    assert_eq!(ls["leading"], true, "{ls}");
    assert_eq!(fs["leading"], false, "{fs}");
    assert_eq!(fs["holder"], lid.as_str(), "{fs}");
    assert_eq!(fs["lease"], format!("{LEASE_NS}/{LEASE}"), "{fs}");
    let (_, lm) = leader.plain_get("/metrics").await;
    let (_, fm) = follower.plain_get("/metrics").await;
    assert!(lm.contains("hpa_bridge_deletion_cost_leader 1\n"), "{lm}");
    assert!(fm.contains("hpa_bridge_deletion_cost_leader 0\n"), "{fm}");
    let transitions = api.lease_object(LEASE_NS, LEASE).unwrap()["spec"]["leaseTransitions"]
        .as_i64()
        .unwrap();

    // The leader dies without releasing; an index changes meanwhile.
    drop(leader);
    let last_renewal = applied_writes(&api, lc, &lid).last().unwrap().at;
    ex.page("/pods/web-7c9d-d", index_of("web", "web-7c9d-d", 3));
    let patched = until("the new holder's patch", || {
        api.patches()
            .into_iter()
            .find(|p| p.caller == fc && p.name == "web-7c9d-d")
    })
    .await;
    let takeover = applied_writes(&api, fc, &fid)[0].at;
    assert!(
        takeover.duration_since(last_renewal) >= LEASE_DURATION,
        "taken over {:?} after the last renewal, before the lease expired",
        takeover.duration_since(last_renewal)
    );
    assert!(patched.at > takeover, "patched before holding the lease");
    assert_eq!(cost_of(&api, "web-7c9d-d").as_deref(), Some("3"));
    let spec = &api.lease_object(LEASE_NS, LEASE).unwrap()["spec"];
    assert_eq!(spec["holderIdentity"], fid.as_str());
    assert_eq!(spec["leaseTransitions"], transitions + 1, "{spec}");
    assert_eq!(lease_status(&follower).await["leading"], true);
}

/// A patch held up past the writer's lease term (the server queues it, as API priority and
/// fairness may) is abandoned at the end of the term, counted as `timeout`, and does not keep a
/// clean shutdown from releasing the Lease. Fault: a PATCH that hangs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_held_up_past_the_lease_term_is_abandoned() {
    let ex = TestExporter::start().await;
    let api = KubeApi::start().await;
    opted_in_web_and_other(&api, &ex);
    let stall = Duration::from_secs(20);
    api.stall_patches(Some(stall));
    let writer = start_writer(&api, "a").await;
    let started = Instant::now();
    loop {
        let (_, metrics) = writer.plain_get("/metrics").await;
        if metrics.contains("hpa_bridge_deletion_cost_patches_total{result=\"timeout\"}") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "no patch was abandoned: {metrics}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let lid = lease_status(&writer).await["identity"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(lease_holder(&api).as_deref(), Some(lid.as_str()));
    // The shutdown starts just as a patch reaches the server, so one is held up throughout.
    let arrived = api.patches_stalled();
    until("another patch held up", || {
        (api.patches_stalled() > arrived).then_some(())
    })
    .await;
    let status = std::process::Command::new("kill")
        .args(["-TERM", &writer.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let asked = Instant::now();
    until("the lease released", || {
        (!applied_writes(&api, "a", "").is_empty()).then_some(())
    })
    .await;
    assert!(
        asked.elapsed() < stall / 2,
        "the release waited {:?}, for a patch held up by the server",
        asked.elapsed()
    );
}

/// A writer that shuts down cleanly releases the Lease, so the other replica takes over at once
/// instead of after the lease duration; a writer whose renewals fail stops patching within the
/// renew deadline, and writes again once it renews. Fault: one caller's Lease writes refused on
/// demand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_passes_at_once_and_a_writer_that_cannot_renew_stops() {
    let ex = TestExporter::start().await;
    let api = KubeApi::start().await;
    opted_in_web_and_other(&api, &ex);
    let a = start_writer(&api, "a").await;
    let b = start_writer(&api, "b").await;
    let ((leader, lc, lid), (follower, fc, fid)) = elect(&api, a, b).await;

    let status = std::process::Command::new("kill")
        .args(["-TERM", &leader.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    until("the follower holding the lease", || {
        (lease_holder(&api).as_deref() == Some(fid.as_str())).then_some(())
    })
    .await;
    let released = applied_writes(&api, lc, "");
    assert_eq!(released.len(), 1, "one release: {:?}", api.lease_writes());
    let last_renewal = applied_writes(&api, lc, &lid).last().unwrap().at;
    let takeover = applied_writes(&api, fc, &fid)[0].at;
    assert!(
        takeover.duration_since(last_renewal) < LEASE_DURATION,
        "taken over {:?} after the last renewal: the release was not used",
        takeover.duration_since(last_renewal)
    );
    assert!(
        api.patches()
            .iter()
            .all(|p| p.caller != lc || p.at < released[0].at),
        "patched after releasing"
    );

    // The holder's index changes all the time, so the writer always has a patch to send.
    let toggling = {
        let ex = ex.clone();
        tokio::spawn(async move {
            for i in 0.. {
                let index = 1 + i % 2;
                ex.page("/pods/web-7c9d-d", index_of("web", "web-7c9d-d", index));
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    let patches_by = |caller: &str, after: Instant| {
        api.patches()
            .into_iter()
            .filter(|p| p.caller == caller && p.at > after)
            .count()
    };
    let before = Instant::now();
    until("the new holder patching", || {
        (patches_by(fc, before) >= 2).then_some(())
    })
    .await;

    // Its renewals fail: within the renew deadline it stops, and stays stopped.
    api.fail_lease_writes(fc, Some(500));
    let failing = Instant::now();
    tokio::time::sleep(RENEW_DEADLINE + Duration::from_secs(1)).await;
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        patches_by(fc, stopped),
        0,
        "patched more than {RENEW_DEADLINE:?} after its renewals began to fail at {:?}",
        failing
    );
    let fs = lease_status(&follower).await;
    assert_eq!(fs["leading"], false, "{fs}");
    let (_, fm) = follower.plain_get("/metrics").await;
    assert!(fm.contains("hpa_bridge_deletion_cost_leader 0\n"), "{fm}");

    // Renewals work again: the lease still names it, so it renews and writes.
    api.fail_lease_writes(fc, None);
    let renewed = Instant::now();
    until("patches after renewing", || {
        (patches_by(fc, renewed) >= 1).then_some(())
    })
    .await;
    toggling.abort();
    drop(leader);
}

/// `GET` list requests (not watches) for StatefulSets in the test namespace.
fn statefulset_lists(api: &KubeApi) -> usize {
    api.requests()
        .iter()
        .filter(|r| {
            r.starts_with(&format!("GET /apis/apps/v1/namespaces/{NS}/statefulsets"))
                && !r.contains("watch=true")
        })
        .count()
}

/// A StatefulSet `name` whose pod 0 reports index 1, pod 1 index 2 and pod 2 is never scraped
/// successfully (503), plus a controller pod recommending 1: the floor stays incomplete, so
/// `hpa_target_replicas` can only hold at the workload's `spec.replicas` from the watch cache.
fn pods_with_one_unscraped(api: &KubeApi, ex: &TestExporter, name: &str) {
    for i in 0..3u64 {
        let pod_name = format!("{name}-{i}");
        let path = format!("/pods/{pod_name}");
        if i < 2 {
            ex.page(&path, index_of(name, &pod_name, i + 1));
        } else {
            ex.set(
                &path,
                Behaviour {
                    body: "starting".into(),
                    status: 503,
                    delay: Duration::ZERO,
                },
            );
        }
        api.apply(&pod(&pod_name, name, owner("StatefulSet", name), ex, &path));
    }
    let ctl_path = format!("/ctl/{name}");
    ex.page(&ctl_path, expect_of(name, 1));
    let mut ctl = pod(
        &format!("{name}-ctl"),
        name,
        owner("StatefulSet", name),
        ex,
        &ctl_path,
    );
    ctl.metadata.owner_references = None;
    api.apply(&ctl);
}

/// Bad input: pods owned by a StatefulSet the watch cache does not hold (yet). Its
/// spec.replicas is unknown, so the target cannot hold at it: the answer is a refusal that says
/// the workload is not in the watch cache, never a guess. Once the StatefulSet arrives through
/// the watch, the same query holds at its spec.replicas. Fault: pods without their StatefulSet,
/// which a real cluster's garbage collector removes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workload_not_in_the_watch_cache_is_refused_never_guessed() {
    let ex = TestExporter::start().await;
    let api = KubeApi::start().await;
    pods_with_one_unscraped(&api, &ex, "arena");
    let adapter = start_adapter(&api, "[games]").await;
    let arena = "hpa_target_name=arena";
    let refused = adapter
        .eventually(
            NS,
            "hpa_target_replicas",
            arena,
            "a refusal naming the watch cache",
            |c, v| {
                c == 503
                    && v["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("is not in the watch cache"))
            },
        )
        .await;
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains("spec.replicas of StatefulSet games/arena is not known yet"),
        "{message}"
    );
    // The pods are scraped and the answer still refuses: nothing stands in for spec.replicas.
    for _ in 0..5 {
        let (code, v) = adapter.metric(NS, "hpa_target_replicas", arena).await;
        assert_eq!(code, 503, "a guess was served: {v}");
    }

    api.apply(&statefulset("arena", 4, None));
    adapter
        .eventually(
            NS,
            "hpa_target_replicas",
            arena,
            "holding at spec.replicas 4 once the StatefulSet is in the watch cache",
            value_is("4"),
        )
        .await;
}

/// Polls `hpa_target_replicas` until `done()` and at least `min_answers` answers, asserting
/// that every answer is `value`: the last known state holds. A generous deadline, no timing
/// threshold.
async fn answers_hold_at(
    adapter: &AdapterProcess,
    selector: &str,
    value: &str,
    min_answers: usize,
    what: &str,
    done: impl Fn() -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut answers = 0;
    while answers < min_answers || !done() {
        let (code, v) = adapter.metric(NS, "hpa_target_replicas", selector).await;
        assert_eq!(
            (code, single_value(&v).as_deref()),
            (200, Some(value)),
            "waiting for {what}, the last known state must hold: {v}"
        );
        answers += 1;
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Faults: the watches break, on demand (the etcd outage on the real control plane is
/// in cluster.rs): first every open watch ends with a 410
/// Gone `ERROR` event, then the server "restarts" (every request answers 503, and its watch
/// cache starts after the restart, so an old resourceVersion is 410 Gone). The reflectors
/// re-list each time; during the gap the answers come from the last known state (spec.replicas
/// and the pods stay known), and a spec.replicas changed meanwhile is seen after the re-list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_watch_relists_and_answers_hold_the_last_known_state_meanwhile() {
    let ex = TestExporter::start().await;
    let api = KubeApi::start().await;
    api.apply(&statefulset("lobby", 3, None));
    pods_with_one_unscraped(&api, &ex, "lobby");
    let adapter = start_adapter(&api, "[games]").await;
    let lobby = "hpa_target_name=lobby";
    // max(recommendation 1, known floor 2, spec.replicas 3).
    adapter
        .eventually(NS, "hpa_target_replicas", lobby, "target 3", value_is("3"))
        .await;
    let lists_before = statefulset_lists(&api);

    // 1. Every watch stream ends with 410 Gone: the reflector re-lists, then watches again and
    //    sees the next change.
    api.break_watches();
    answers_hold_at(
        &adapter,
        lobby,
        "3",
        1,
        "a re-list after the watch broke",
        || statefulset_lists(&api) > lists_before,
    )
    .await;
    api.apply(&statefulset("lobby", 4, None));
    adapter
        .eventually(
            NS,
            "hpa_target_replicas",
            lobby,
            "target 4 through the new watch",
            value_is("4"),
        )
        .await;

    // 2. The API server goes down. spec.replicas changes meanwhile (nobody can see it).
    api.begin_outage();
    api.apply(&statefulset("lobby", 6, None));
    answers_hold_at(
        &adapter,
        lobby,
        "4",
        5,
        "the reflectors retrying against the restarting server",
        || api.refused() >= 4,
    )
    .await;
    // The pods are still known: every one is still a scrape target.
    let status = adapter.status().await;
    for pod in ["lobby-0", "lobby-1", "lobby-2", "lobby-ctl"] {
        assert!(
            status_target(&status, &format!("{NS}/{pod}")).is_some(),
            "{pod} was forgotten during the outage: {status}"
        );
    }
    let lists_in_outage = statefulset_lists(&api);

    // 3. The server is back with a fresh watch cache: the reflectors re-list and see 6. The
    //    watcher's backoff decides when it retries, so the deadline is generous.
    api.end_outage();
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let (code, v) = adapter.metric(NS, "hpa_target_replicas", lobby).await;
        match (code, single_value(&v).as_deref()) {
            (200, Some("6")) => break,
            (200, Some("4")) => {}
            other => panic!("neither the old nor the new spec.replicas: {other:?} {v}"),
        }
        assert!(Instant::now() < deadline, "spec.replicas 6 never seen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        statefulset_lists(&api) > lists_in_outage,
        "spec.replicas 6 was seen without a re-list: {:?}",
        api.requests()
    );
    let reason = target_reason(&adapter, lobby).await;
    assert!(reason.contains("current spec.replicas 6"), "{reason}");
}
