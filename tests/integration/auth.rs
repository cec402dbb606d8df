//! Aggregated-API security end to end (docs/hpa-behaviour.md §3.2–3.3): the real binary, real
//! TLS with CAs and certificates generated here, and the real API server (tests/control-plane)
//! deciding the adapter's TokenReviews and SubjectAccessReviews with its RBAC; its audit log
//! keeps the reviews' bodies, so a test reads exactly what the adapter asked. A loopback
//! stand-in (the kit's, crates/hpa-bridge-kit/src/kube_api.rs, through kubeapi.rs) stays only for what the real
//! API server cannot be made to do on demand, each test saying which: fail a review, count the
//! reviews of one token (the audit log does not say which token a TokenReview carried), or
//! rotate the front-proxy CA in `kube-system/extension-apiserver-authentication` under the
//! shared cluster. It answers in the reviews' and the ConfigMap's real JSON forms.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hpa_bridge_kit::exporter::TestExporter;

use crate::common::control_plane::ControlPlane;
use crate::common::*;
use crate::kubeapi::{KubeApi as FakeApiServer, TOKEN};
use hpa_bridge_kit::kube_api::{AUTH_CONFIGMAP, SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{json, Value};

const METRIC: &str =
    "/apis/external.metrics.k8s.io/v1beta1/namespaces/default/hpa_expect_replicas?labelSelector=hpa_target_name%3Dlobby";
const FRONT_PROXY_CN: &str = "front-proxy-client";
/// manifests/base's service account, as which the adapter runs against the real API server.
const ADAPTER_USER: &str = "system:serviceaccount:hpa-bridge:hpa-bridge";

/// An exporter with one recommendation (7), the fake API server, a front-proxy CA, a client CA,
/// and the adapter trusting them.
struct World {
    _exporter: TestExporter,
    api: FakeApiServer,
    front: Pki,
    clients: Pki,
    adapter: AdapterProcess,
}

async fn world(extra: &[&str]) -> World {
    world_with(extra, true).await
}

async fn world_with(extra: &[&str], ca_flags: bool) -> World {
    let exporter = TestExporter::start().await;
    exporter.page("/ctl", expect_page("ctl-0", "7"));
    let api = FakeApiServer::start().await;
    let front = Pki::new("front-proxy-ca");
    let clients = Pki::new("client-ca");
    let kubeconfig = api.kubeconfig();
    let mut flags: Vec<String> = vec![
        "--authentication-kubeconfig".into(),
        kubeconfig.display().to_string(),
    ];
    if ca_flags {
        flags.extend([
            "--requestheader-client-ca-file".into(),
            front.ca_path().display().to_string(),
            "--requestheader-allowed-names".into(),
            FRONT_PROXY_CN.into(),
            "--client-ca-file".into(),
            clients.ca_path().display().to_string(),
            "--authentication-skip-lookup".into(),
        ]);
    }
    flags.extend(extra.iter().map(|s| s.to_string()));
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let adapter = AdapterProcess::start_with(
        &fast_config(&[(exporter.url("/ctl"), "default", "ctl-0")]),
        &flags,
    )
    .await;
    World {
        _exporter: exporter,
        api,
        front,
        clients,
        adapter,
    }
}

impl World {
    fn with_cert(&self, issued: &Issued) -> HttpsClient {
        self.adapter.client_as(issued)
    }

    fn anonymous(&self) -> HttpsClient {
        self.adapter.client()
    }

    fn allow(&self, user: &str) {
        self.api
            .set_reviews(|b| b.allowed_users.push(user.to_string()));
    }

    fn sar_count(&self) -> usize {
        self.api.count(SUBJECT_ACCESS_REVIEWS)
    }

    fn last_sar_spec(&self) -> Value {
        self.api.last_review(SUBJECT_ACCESS_REVIEWS)["spec"].clone()
    }
}

async fn get(client: &HttpsClient, path: &str, headers: &[(&str, &str)]) -> (u16, Value) {
    let (code, body) = client
        .get(path, headers)
        .await
        .unwrap_or_else(|e| panic!("GET {path} failed: {e}"));
    let v = serde_json::from_str(&body)
        .unwrap_or_else(|e| panic!("non-JSON body for {path} ({code}): {e}: {body}"));
    (code, v)
}

fn assert_status(v: &Value, code: u16, reason: &str) {
    assert_eq!(v["kind"], "Status", "{v}");
    assert_eq!(v["apiVersion"], "v1", "{v}");
    assert_eq!(v["status"], "Failure", "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert_eq!(v["reason"], reason, "{v}");
}

fn assert_value_7(code: u16, v: &Value) {
    assert_eq!(code, 200, "{v}");
    assert_eq!(single_value(v).as_deref(), Some("7"), "{v}");
}

/// The review's attributes for lobby's External metric in `ns`.
fn metric_attributes(ns: &str) -> Value {
    json!({
        "verb": "list",
        "group": "external.metrics.k8s.io",
        "version": "v1beta1",
        "resource": "hpa_expect_replicas",
        "namespace": ns,
    })
}

/// The aggregator's path (docs/hpa-behaviour.md §3.2), the review by the real API server
/// (tests/control-plane) and read back from its audit log: a proxy certificate with an allowed
/// name vouches for the user, groups and extra in its headers; any other certificate, or none,
/// does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn front_proxy_headers_are_trusted_only_behind_an_allowed_proxy_certificate() {
    let w = Real::start(
        "front-proxy",
        &["--authorization-webhook-cache-unauthorized-ttl", "0s"],
    )
    .await;
    w.allow("alice").await;
    let proxy = w.front.client("proxy", FRONT_PROXY_CN, &[]);
    let headers = [
        ("X-Remote-User", "alice"),
        ("X-Remote-Group", "team-a"),
        ("X-Remote-Group", "team-b"),
        ("X-Remote-Extra-Acme.io%2fTicket", "T-1"),
    ];

    // The aggregator's path: proxy certificate with the allowed CN, identity in headers.
    let (code, v) = get(&w.with_cert(&proxy), &w.metric, &headers).await;
    assert_value_7(code, &v);
    let spec = w.last_review();
    assert_eq!(spec["user"], "alice");
    assert_eq!(
        spec["groups"],
        json!(["team-a", "team-b", "system:authenticated"])
    );
    assert_eq!(spec["extra"], json!({"acme.io/ticket": ["T-1"]}));
    assert_eq!(spec["resourceAttributes"], metric_attributes(&w.ns));
    let reviews_so_far = w.reviews().len();

    // Same CA, CN not in --requestheader-allowed-names: the headers are not believed.
    let rogue = w.front.client("rogue", "not-the-proxy", &[]);
    let (code, v) = get(&w.with_cert(&rogue), &w.metric, &headers).await;
    assert_eq!(code, 401, "{v}");
    assert_status(&v, 401, "Unauthorized");

    // No certificate at all: forged headers are ignored, so the caller is anonymous.
    let (code, v) = get(&w.anonymous(), &w.metric, &headers).await;
    assert_eq!(code, 401, "{v}");
    assert_status(&v, 401, "Unauthorized");
    assert_eq!(
        w.reviews().len(),
        reviews_so_far,
        "no review may name alice"
    );

    // A proxy certificate without a user header vouches for nobody.
    let (code, _) = get(&w.with_cert(&proxy), &w.metric, &[]).await;
    assert_eq!(code, 401);

    // A client-CA certificate is its own user: bob, whatever the headers claim.
    let bob = w.clients.client("bob", "bob", &["team-b"]);
    let (code, v) = get(&w.with_cert(&bob), &w.metric, &headers).await;
    assert_eq!(code, 403, "{v}");
    assert_status(&v, 403, "Forbidden");
    assert!(
        v["message"].as_str().unwrap().contains("User \"bob\""),
        "{v}"
    );
    let spec = w.last_review();
    assert_eq!(spec["user"], "bob");
    assert_eq!(spec["groups"], json!(["team-b", "system:authenticated"]));
    assert!(spec.get("extra").is_none(), "{spec}");

    // A certificate from a CA the adapter does not trust fails the TLS handshake, as
    // kube-apiserver's VerifyClientCertIfGiven does: a presented certificate must verify.
    let evil = Pki::new("evil-ca");
    let forged = evil.client("forged", FRONT_PROXY_CN, &[]);
    assert!(w.with_cert(&forged).get(&w.metric, &headers).await.is_err());
    let err = raw_tls_get(w.adapter.port, &w.adapter.pki, &forged)
        .await
        .expect_err("a certificate from an unknown CA must not get an answer");
    assert!(
        err.contains("UnknownCA") || err.contains("BadCertificate"),
        "{err}"
    );
    assert_eq!(
        w.reviews().len(),
        reviews_so_far + 1,
        "only bob was reviewed"
    );
}

/// A client certificate's CN is the user and its O attributes the groups, reviewed by the real
/// API server's RBAC (tests/control-plane): without a grant the refusal names the user as
/// k8s.io/apiserver words it; a RoleBinding to the *group* opens the metric, so the groups
/// reached the review; discovery is a non-resource request, which the default
/// `system:discovery` role allows every authenticated user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificates_user_and_groups_are_what_real_rbac_decides_on() {
    let w = Real::start(
        "cert-groups",
        &["--authorization-webhook-cache-unauthorized-ttl", "0s"],
    )
    .await;
    let (cp, ns, metric) = (w.cp, &w.ns, &w.metric);
    let (user, group) = (format!("carol-{ns}"), format!("metrics-team-{ns}"));
    let client = w.with_cert(&w.clients.client("carol", &user, &[group.as_str()]));
    let (code, v) = get(&client, metric, &[]).await;
    assert_eq!(code, 403, "{v}");
    assert_status(&v, 403, "Forbidden");
    assert_eq!(
        v["message"],
        format!(
            "hpa_expect_replicas.external.metrics.k8s.io is forbidden: User \"{user}\" cannot list resource \
             \"hpa_expect_replicas\" in API group \"external.metrics.k8s.io\" in the namespace \"{ns}\""
        )
    );
    grant(
        cp,
        ns,
        "metrics-team",
        "- apiGroups: [external.metrics.k8s.io]\n  resources: [hpa_expect_replicas]\n  verbs: [list]",
        ("Group", &group),
    );
    let v = once_allowed(&client, metric).await;
    assert_value_7(200, &v);
    // The same grant does not reach another metric.
    let other = metric.replace("hpa_expect_replicas", "hpa_target_replicas");
    let (code, v) = get(&client, &other, &[]).await;
    assert_eq!(code, 403, "{v}");
    let (code, v) = get(&client, "/apis/external.metrics.k8s.io/v1beta1", &[]).await;
    assert_eq!(code, 200, "{v}");
}

/// The review's exact body for a client certificate, as the real API server's audit log keeps
/// it, and `system:masters` allowed without one (`--authorization-always-allow-groups`): the
/// log holds no review for it, though the real RBAC would allow it too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_review_carries_the_certificates_user_and_groups_and_masters_skip_it() {
    let w = Real::start("review-body", &[]).await;
    let carol = w.clients.client("carol", "carol", &["metrics-team"]);
    let (code, v) = get(&w.with_cert(&carol), &w.metric, &[]).await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(
        w.reviews(),
        vec![json!({
            "user": "carol",
            "groups": ["metrics-team", "system:authenticated"],
            "resourceAttributes": metric_attributes(&w.ns),
        })]
    );
    let admin = w
        .clients
        .client("admin", "cluster-admin", &["system:masters"]);
    let (code, v) = get(&w.with_cert(&admin), &w.metric, &[]).await;
    assert_value_7(code, &v);
    assert_eq!(w.reviews().len(), 1, "system:masters was reviewed");
}

/// A client certificate whose subject holds two CN attributes, `first` then `second`, signed by
/// `pki`.
fn two_cn_client(pki: &Pki, file: &str, first: &str, second: &str) -> Issued {
    let mut params = hpa_bridge_server::auth::x509::two_cn_params(first, second);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    pki.write(file, pki.authority.issue(params).unwrap())
}

/// Go's x509 keeps the last CN; kube-apiserver decides with it, so must we. The real RBAC
/// decides and the audit log shows whom the adapter asked about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_common_names_the_last_one_counts_as_in_go() {
    let w = Real::start(
        "two-cn",
        &["--authorization-webhook-cache-unauthorized-ttl", "0s"],
    )
    .await;
    w.allow("alice").await;
    w.allow("bob").await;
    let headers = [("X-Remote-User", "alice")];

    // Front proxy: the allowed name first, another last: kube-apiserver refuses it, so the
    // headers are not trusted and the request is anonymous.
    let evil_last = two_cn_client(&w.front, "evil-last", FRONT_PROXY_CN, "evil-proxy");
    let (code, v) = get(&w.with_cert(&evil_last), &w.metric, &headers).await;
    assert_eq!(code, 401, "{v}");
    assert_status(&v, 401, "Unauthorized");
    // The other order is the allowed proxy.
    let allowed_last = two_cn_client(&w.front, "allowed-last", "evil-proxy", FRONT_PROXY_CN);
    let (code, v) = get(&w.with_cert(&allowed_last), &w.metric, &headers).await;
    assert_value_7(code, &v);
    assert_eq!(w.last_review()["user"], "alice");

    // x509 user: the last CN, in both orders.
    let (code, v) = get(
        &w.with_cert(&two_cn_client(
            &w.clients,
            "admin-bob",
            "system:admin",
            "bob",
        )),
        &w.metric,
        &[],
    )
    .await;
    assert_value_7(code, &v);
    assert_eq!(w.last_review()["user"], "bob");
    let (code, v) = get(
        &w.with_cert(&two_cn_client(
            &w.clients,
            "bob-admin",
            "bob",
            "system:admin",
        )),
        &w.metric,
        &[],
    )
    .await;
    assert_eq!(code, 403, "{v}");
    assert_eq!(w.last_review()["user"], "system:admin");
}

/// Anonymous callers get health and nothing else, and cost the API server no review.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anonymous_reaches_only_health() {
    let w = Real::start("anonymous", &[]).await;
    let anon = w.anonymous();
    for path in ["/healthz", "/livez", "/readyz"] {
        let (code, _) = anon.get(path, &[]).await.unwrap();
        assert_eq!(code, 200, "{path}");
    }
    for path in [
        w.metric.as_str(),
        "/apis",
        "/apis/external.metrics.k8s.io/v1beta1",
    ] {
        let (code, v) = get(&anon, path, &[]).await;
        assert_eq!(code, 401, "{path}: {v}");
        assert_status(&v, 401, "Unauthorized");
    }
    assert_eq!(w.reviews(), Vec::<Value>::new(), "anonymous was reviewed");
}

/// An authorizer that fails is an error, never the metric. A stand-in: the real API server
/// cannot be made to fail a SubjectAccessReview on demand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_review_allow_deny_and_error_never_allows() {
    let w = world(&[
        "--authorization-webhook-cache-authorized-ttl",
        "0s",
        "--authorization-webhook-cache-unauthorized-ttl",
        "0s",
    ])
    .await;
    let dave = w.clients.client("dave", "dave", &[]);
    let client = w.with_cert(&dave);
    w.allow("dave");
    let (code, v) = get(&client, METRIC, &[]).await;
    assert_value_7(code, &v);

    w.api.set_reviews(|b| b.allowed_users.clear());
    let (code, v) = get(&client, METRIC, &[]).await;
    assert_eq!(code, 403, "{v}");
    let msg = v["message"].as_str().unwrap();
    for part in [
        "User \"dave\"",
        "cannot list",
        "resource \"hpa_expect_replicas\"",
        "namespace \"default\"",
    ] {
        assert!(msg.contains(part), "{part} missing from {msg}");
    }

    // The authorizer fails: an error, never the metric.
    w.allow("dave");
    w.api.set_reviews(|b| b.access_review_error = Some(500));
    let (code, v) = get(&client, METRIC, &[]).await;
    assert_eq!(code, 500, "{v}");
    assert_status(&v, 500, "InternalError");
    assert!(v.get("items").is_none());

    // The API server recovers: allowed again.
    w.api.set_reviews(|b| b.access_review_error = None);
    let (code, v) = get(&client, METRIC, &[]).await;
    assert_value_7(code, &v);
}

/// No API server to ask: every review fails closed (a kubeconfig pointing at a dead port).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_api_server_fails_closed() {
    // A kubeconfig that points at a port nobody listens on.
    let api = FakeApiServer::start().await;
    let dead_port = free_port();
    let kubeconfig = api.dir.path().join("dead.yaml");
    std::fs::write(
        &kubeconfig,
        std::fs::read_to_string(api.kubeconfig())
            .unwrap()
            .replace(&format!(":{}", api.addr.port()), &format!(":{dead_port}")),
    )
    .unwrap();
    let exporter = TestExporter::start().await;
    exporter.page("/ctl", expect_page("ctl-0", "7"));
    let clients = Pki::new("client-ca");
    let adapter = AdapterProcess::start_with(
        &fast_config(&[(exporter.url("/ctl"), "default", "ctl-0")]),
        &[
            "--authentication-kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--client-ca-file",
            clients.ca_path().to_str().unwrap(),
            "--authentication-skip-lookup",
        ],
    )
    .await;
    let erin = clients.client("erin", "erin", &[]);
    let client = adapter.client_as(&erin);
    let (code, v) = get(&client, METRIC, &[]).await;
    assert_eq!(code, 500, "{v}");
    assert_status(&v, 500, "InternalError");

    let (code, v) = get(
        &adapter.client(),
        METRIC,
        &[("Authorization", "Bearer some-token")],
    )
    .await;
    assert_eq!(code, 503, "{v}");
    assert_status(&v, 503, "ServiceUnavailable");
}

const HPA_USER: &str = "system:serviceaccount:kube-system:horizontal-pod-autoscaler";

fn hpa_token(api: &FakeApiServer, token: &str) {
    let token = token.to_string();
    api.set_reviews(move |b| {
        b.tokens.insert(
            token,
            json!({
                "username": HPA_USER,
                "uid": "0d4a3b6e-5f0c-4c47-9a43-3d5f8b1e2a77",
                "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system"],
            }),
        );
    });
}

/// A service account's token (the TokenRequest API's, as the HPA controller holds one) is
/// reviewed by the real API server with the adapter's own identity, and its user, uid and groups
/// are what the access review asks about (read back from the audit log); a forged token is
/// refused. No token reaches the adapter's log or /status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_accounts_token_is_reviewed_by_the_api_server_and_a_forged_one_refused() {
    let w = Real::start("token-review", &[]).await;
    w.cp.kubectl(&["create", "serviceaccount", "hpa", "-n", &w.ns]);
    let token = w.cp.kubectl(&["create", "token", "hpa", "-n", &w.ns]);
    let token = token.trim();
    let uid = w.cp.get_json(&["serviceaccount", "hpa", "-n", &w.ns])["metadata"]["uid"].clone();
    let user = format!("system:serviceaccount:{}:hpa", w.ns);
    w.allow(&user).await;
    let token_reviews = || {
        w.cp.audited(ADAPTER_USER)
            .iter()
            .filter(|a| a.resource == "tokenreviews" && a.code == 201)
            .count()
    };
    let before = token_reviews();
    let anon = w.anonymous();
    let bearer = format!("Bearer {token}");
    let (code, v) = get(&anon, &w.metric, &[("Authorization", &bearer)]).await;
    assert_value_7(code, &v);
    assert!(token_reviews() > before, "no TokenReview by the adapter");
    let spec = w.last_review();
    assert_eq!(spec["user"], user.as_str(), "{spec}");
    assert_eq!(spec["uid"], uid, "{spec}");
    for group in [
        "system:serviceaccounts".to_string(),
        format!("system:serviceaccounts:{}", w.ns),
        "system:authenticated".into(),
    ] {
        assert!(
            spec["groups"].as_array().unwrap().contains(&json!(group)),
            "{group} missing: {spec}"
        );
    }
    assert_eq!(spec["resourceAttributes"], metric_attributes(&w.ns));

    let (code, v) = get(
        &anon,
        &w.metric,
        &[("Authorization", "Bearer forged-token")],
    )
    .await;
    assert_eq!(code, 401, "{v}");
    assert_status(&v, 401, "Unauthorized");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .contains("invalid bearer token"),
        "{v}"
    );

    let status = w.adapter.status().await.to_string();
    let log = w.adapter.log();
    for secret in [token, "forged-token"] {
        assert!(!log.contains(secret), "a token in the log:\n{log}");
        assert!(!status.contains(secret), "a token in /status");
    }
}

/// A TokenReview that fails is "unavailable", never an answer, and the adapter authenticates
/// itself to the API server. A stand-in: the real API server cannot be made to fail a
/// TokenReview on demand.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_token_review_is_unavailable_never_allowed() {
    let w = world(&[]).await;
    hpa_token(&w.api, "hpa-token-1");
    w.allow(HPA_USER);
    let anon = w.anonymous();
    let (code, v) = get(&anon, METRIC, &[("Authorization", "Bearer hpa-token-1")]).await;
    assert_value_7(code, &v);
    let sent = w.api.recorded(TOKEN_REVIEWS);
    assert_eq!(
        sent[0].authorization.as_deref(),
        Some(&*format!("Bearer {TOKEN}")),
        "the adapter authenticates itself to the API server"
    );

    w.api.set_reviews(|b| b.token_review_error = Some(500));
    let (code, v) = get(&anon, METRIC, &[("Authorization", "Bearer another-token")]).await;
    assert_eq!(code, 503, "{v}");
    assert_status(&v, 503, "ServiceUnavailable");
    let log = w.adapter.log();
    for secret in ["hpa-token-1", "another-token", TOKEN] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}

/// One review per distinct question while it is cached, another once it expires. A stand-in:
/// the count is of the reviews received, and the real API server's audit log does not say
/// which token a TokenReview carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn review_caches_hit_and_expire() {
    // Long TTLs: repeated questions are answered from the caches.
    let w = world(&[
        "--authentication-token-webhook-cache-ttl",
        "1h",
        "--authorization-webhook-cache-authorized-ttl",
        "1h",
        "--authorization-webhook-cache-unauthorized-ttl",
        "1h",
    ])
    .await;
    hpa_token(&w.api, "cached-token");
    w.allow(HPA_USER);
    let anon = w.anonymous();
    let bearer = [("Authorization", "Bearer cached-token")];
    let henry = w.clients.client("henry", "henry", &[]);
    for _ in 0..3 {
        let (code, v) = get(&anon, METRIC, &bearer).await;
        assert_value_7(code, &v);
        let (code, _) = get(&anon, METRIC, &[("Authorization", "Bearer nope")]).await;
        assert_eq!(code, 401);
        let (code, _) = get(&w.with_cert(&henry), METRIC, &[]).await;
        assert_eq!(code, 403);
    }
    assert_eq!(
        w.api.count(TOKEN_REVIEWS),
        2,
        "one review per distinct token"
    );
    assert_eq!(w.sar_count(), 2, "one allow and one deny review");

    // Short TTLs: after they pass, the same question is asked again.
    let w = world(&[
        "--authentication-token-webhook-cache-ttl",
        "300ms",
        "--authorization-webhook-cache-authorized-ttl",
        "300ms",
        "--authorization-webhook-cache-unauthorized-ttl",
        "300ms",
    ])
    .await;
    hpa_token(&w.api, "cached-token");
    w.allow(HPA_USER);
    let anon = w.anonymous();
    let henry = w.clients.client("henry", "henry", &[]);
    for round in 1..=2 {
        let (code, v) = get(&anon, METRIC, &bearer).await;
        assert_value_7(code, &v);
        let (code, _) = get(&w.with_cert(&henry), METRIC, &[]).await;
        assert_eq!(code, 403);
        assert_eq!(w.api.count(TOKEN_REVIEWS), round);
        assert_eq!(w.sar_count(), 2 * round);
        tokio::time::sleep(Duration::from_millis(1000)).await;
    }
}

fn pem(pki: &Pki) -> String {
    std::fs::read_to_string(pki.ca_path()).unwrap()
}

fn configmap(front: &Pki, clients: &Pki) -> BTreeMap<String, String> {
    [
        ("client-ca-file", pem(clients)),
        ("requestheader-client-ca-file", pem(front)),
        (
            "requestheader-allowed-names",
            format!("[\"{FRONT_PROXY_CN}\"]"),
        ),
        (
            "requestheader-username-headers",
            "[\"X-Proxy-User\"]".into(),
        ),
        ("requestheader-group-headers", "[\"X-Proxy-Group\"]".into()),
        (
            "requestheader-extra-headers-prefix",
            "[\"X-Proxy-Extra-\"]".into(),
        ),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The trust and header names come from `kube-system/extension-apiserver-authentication`, and
/// follow its rotation. A stand-in: rotating that ConfigMap in the real cluster would change
/// the trust of every test sharing it, and its real aggregator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_comes_from_the_configmap_and_follows_its_rotation() {
    // The ConfigMap must be there before the adapter starts; the world's own CAs go into it.
    let exporter = TestExporter::start().await;
    exporter.page("/ctl", expect_page("ctl-0", "7"));
    let api = FakeApiServer::start().await;
    let front = Pki::new("front-proxy-ca");
    let clients = Pki::new("client-ca");
    api.set_reviews(|b| b.configmap = Some(configmap(&front, &clients)));
    let adapter = AdapterProcess::start_with(
        &fast_config(&[(exporter.url("/ctl"), "default", "ctl-0")]),
        &[
            "--authentication-kubeconfig",
            api.kubeconfig().to_str().unwrap(),
            "--authentication-reload-interval",
            "200ms",
        ],
    )
    .await;
    let w = World {
        _exporter: exporter,
        api,
        front,
        clients,
        adapter,
    };
    w.allow("ivy");
    w.allow("jack");

    let ivy = w.clients.client("ivy", "ivy", &[]);
    let (code, v) = get(&w.with_cert(&ivy), METRIC, &[]).await;
    assert_value_7(code, &v);

    // The front proxy uses the header names from the ConfigMap, not the defaults.
    let proxy = w.with_cert(&w.front.client("proxy", FRONT_PROXY_CN, &[]));
    let (code, v) = get(&proxy, METRIC, &[("X-Proxy-User", "jack")]).await;
    assert_value_7(code, &v);
    assert_eq!(w.last_sar_spec()["user"], "jack");
    let (code, _) = get(&proxy, METRIC, &[("X-Remote-User", "jack")]).await;
    assert_eq!(code, 401, "X-Remote-User is not a configured header here");

    // Rotate the client CA in the ConfigMap: the new CA's certificates work, the old ones stop.
    let rotated = Pki::new("client-ca-2");
    let new_ivy = rotated.client("ivy2", "ivy", &[]);
    let front = &w.front;
    w.api
        .set_reviews(|b| b.configmap = Some(configmap(front, &rotated)));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok((200, _)) = w.with_cert(&new_ivy).get(METRIC, &[]).await {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "rotated client CA not picked up; log:\n{}",
            w.adapter.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        w.with_cert(&ivy).get(METRIC, &[]).await.is_err(),
        "the old CA's certificate must fail the handshake after rotation"
    );
    assert!(w.api.count(AUTH_CONFIGMAP) >= 2);
}

/// A service account the real RBAC does not let read
/// `kube-system/extension-apiserver-authentication`: the adapter does not start without its
/// trust, unless told to tolerate that, and then refuses what it cannot verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_configmap_stops_startup_unless_tolerated() {
    let cp = ControlPlane::shared();
    let ns = cp.namespace("no-trust").await;
    cp.kubectl(&["create", "serviceaccount", "untrusted", "-n", &ns]);
    let kubeconfig = cp.service_account_kubeconfig(&ns, "untrusted");
    let mut p = AdapterProcess::spawn(
        &fast_config(&[]),
        &["--authentication-kubeconfig", kubeconfig.to_str().unwrap()],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = p.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "adapter kept running without its trust"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!status.success());
    let log = p.log();
    assert!(
        log.contains("kube-system/extension-apiserver-authentication") && log.contains("forbidden"),
        "{log}"
    );
    let asked = cp.audited(&format!("system:serviceaccount:{ns}:untrusted"));
    assert!(
        asked.iter().any(|a| a.resource == "configmaps"
            && a.name == "extension-apiserver-authentication"
            && a.code == 403),
        "{asked:?}"
    );

    // Tolerated: it starts, serves health, and refuses certificates it has no CA for.
    let adapter = AdapterProcess::start_with(
        &fast_config(&[]),
        &[
            "--authentication-kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--authentication-tolerate-lookup-failure",
        ],
    )
    .await;
    let (code, v) = get(&adapter.client(), "/apis", &[]).await;
    assert_eq!(code, 401, "{v}");
}

fn adapter_kubeconfig(adapter: &AdapterProcess, user: &Issued, dir: &Path) -> PathBuf {
    let path = dir.join(format!(
        "kubeconfig-{}.yaml",
        user.cert_path.file_stem().unwrap().to_string_lossy()
    ));
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hpa-bridge\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: u\n  user:\n    client-certificate: {}\n    client-key: {}\ncontexts:\n- name: c\n  context:\n    cluster: hpa-bridge\n    user: u\ncurrent-context: c\n",
            adapter.port,
            adapter.pki.ca_path().display(),
            user.cert_path.display(),
            user.key_path.display()
        ),
    )
    .unwrap();
    path
}

async fn kubectl_get_raw(kubeconfig: PathBuf, home: PathBuf, path: &str) -> std::process::Output {
    let kubectl = peers::kubectl();
    let path = path.to_string();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(kubectl)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["get", "--raw", &path])
            .env("HOME", &home)
            .env("KUBECACHEDIR", home.join("cache"))
            .output()
            .expect("run kubectl")
    })
    .await
    .unwrap()
}

/// kubectl with a client certificate against the adapter, the real API server's RBAC deciding
/// (tests/control-plane): a user a RoleBinding allows reads the metric; one without is refused
/// with the message kubectl prints for any API server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_a_metric_with_a_client_certificate_and_is_forbidden_without_permission() {
    let w = Real::start("kubectl-cert", &[]).await;
    let (cp, ns, adapter, clients) = (w.cp, &w.ns, &w.adapter, &w.clients);
    let (frank, grace) = (format!("frank-{ns}"), format!("grace-{ns}"));
    grant(
        cp,
        ns,
        "readers",
        "- apiGroups: [external.metrics.k8s.io]\n  resources: [hpa_expect_replicas]\n  verbs: [list]",
        ("User", &frank),
    );
    let home = tempfile::tempdir().unwrap();
    let frank_cert = clients.client("frank", &frank, &["readers"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let out = loop {
        let out = kubectl_get_raw(
            adapter_kubeconfig(adapter, &frank_cert, home.path()),
            home.path().into(),
            &w.metric,
        )
        .await;
        if out.status.success() || Instant::now() > deadline {
            break out;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    assert!(
        out.status.success(),
        "kubectl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(single_value(&v).as_deref(), Some("7"), "{v}");

    let grace_cert = clients.client("grace", &grace, &[]);
    let out = kubectl_get_raw(
        adapter_kubeconfig(adapter, &grace_cert, home.path()),
        home.path().into(),
        &w.metric,
    )
    .await;
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Forbidden"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "User \"{grace}\" cannot list resource \"hpa_expect_replicas\""
        )),
        "{stderr}"
    );
}

/// The certificate the server presents, trusting any of `roots`.
async fn presented_certificate(
    port: u16,
    roots: &[CertificateDer<'static>],
) -> CertificateDer<'static> {
    let mut store = rustls::RootCertStore::empty();
    for r in roots {
        store.add(r.clone()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(store)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0]
        .clone()
        .into_owned()
}

/// A raw HTTP/1.1 GET /healthz over TLS with a client certificate: the TLS error, if any.
/// A TLS client trusting `serving`'s CA, before its choice of client certificate.
fn client_config(
    serving: &Pki,
) -> rustls::ConfigBuilder<rustls::ClientConfig, rustls::client::WantsClientCert> {
    let mut store = rustls::RootCertStore::empty();
    store.add(serving.ca_der()).unwrap();
    rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
}

async fn raw_tls_get(port: u16, serving: &Pki, client: &Issued) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (certs, key) = (client.certs(), client.key());
    let config = client_config(serving)
        .with_client_auth_cert(certs, key)
        .unwrap();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    tls.read_to_end(&mut out).await.map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn der_of(pem_text: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem_text.as_bytes()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serving_certificate_files_are_reloaded_without_restart() {
    let adapter =
        AdapterProcess::start_with(&fast_config(&[]), &["--tls-reload-interval", "200ms"]).await;
    let old = der_of(&std::fs::read_to_string(adapter.pki.dir.path().join("server.crt")).unwrap());
    let rotated_ca = Pki::new("rotated-serving-ca");
    let roots = [adapter.pki.ca_der(), rotated_ca.ca_der()];
    assert_eq!(presented_certificate(adapter.port, &roots).await, old);

    let new = rotated_ca.server();
    // Replace key and certificate by rename, as a kubelet secret volume update does.
    let dir = adapter.pki.dir.path();
    std::fs::copy(&new.key_path, dir.join("server.key.new")).unwrap();
    std::fs::copy(&new.cert_path, dir.join("server.crt.new")).unwrap();
    std::fs::rename(dir.join("server.key.new"), dir.join("server.key")).unwrap();
    std::fs::rename(dir.join("server.crt.new"), dir.join("server.crt")).unwrap();
    let want = der_of(&new.cert_pem);
    let deadline = Instant::now() + Duration::from_secs(20);
    while presented_certificate(adapter.port, &roots).await != want {
        assert!(
            Instant::now() < deadline,
            "the new serving certificate was not picked up; log:\n{}",
            adapter.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Only the new CA is needed now.
    let (code, _) = HttpsClient::new(adapter.port, &[rotated_ca.ca_der()], None)
        .get("/healthz", &[])
        .await
        .unwrap();
    assert_eq!(code, 200);
    assert!(!adapter.log().contains("PRIVATE KEY"));
}

/// A Role `name` in `ns` with `rules` (YAML list items), bound to `subject` (kind, name).
fn grant(
    cp: &crate::common::control_plane::ControlPlane,
    ns: &str,
    name: &str,
    rules: &str,
    (kind, subject): (&str, &str),
) {
    cp.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: {name}, namespace: {ns}}}\nrules:\n{rules}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: {name}, namespace: {ns}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: {name}}}\nsubjects: [{{apiGroup: rbac.authorization.k8s.io, kind: {kind}, name: {subject}}}]\n"
    ));
}

/// The answer to `path` once the real RBAC has taken in a new grant (within 30 s).
async fn once_allowed(client: &HttpsClient, path: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, v) = get(client, path, &[]).await;
        if code == 200 {
            return v;
        }
        assert!(Instant::now() < deadline, "never allowed: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The adapter as the base's service account, its reviews by the real API server
/// (tests/control-plane), in a namespace of its own where lobby's recommendation is 7,
/// trusting a front-proxy CA and a client CA made here; its exporter lives as long as it.
struct Real {
    cp: &'static ControlPlane,
    ns: String,
    /// lobby's External metric in `ns`.
    metric: String,
    front: Pki,
    clients: Pki,
    adapter: AdapterProcess,
    _exporter: TestExporter,
}

impl Real {
    async fn start(prefix: &str, extra: &[&str]) -> Real {
        let cp = ControlPlane::shared();
        let ns = cp.namespace(prefix).await;
        let exporter = TestExporter::start().await;
        exporter.page("/ctl", expect_page("ctl-0", "7"));
        let front = Pki::new("front-proxy-ca");
        let clients = Pki::new("client-ca");
        let kubeconfig = cp.adapter_kubeconfig();
        let (front_ca, client_ca) = (front.ca_path(), clients.ca_path());
        let mut flags = vec![
            "--authentication-kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--requestheader-client-ca-file",
            front_ca.to_str().unwrap(),
            "--requestheader-allowed-names",
            FRONT_PROXY_CN,
            "--client-ca-file",
            client_ca.to_str().unwrap(),
            "--authentication-skip-lookup",
        ];
        flags.extend_from_slice(extra);
        let adapter = AdapterProcess::start_with(
            &fast_config(&[(exporter.url("/ctl"), &ns, "ctl-0")]),
            &flags,
        )
        .await;
        Real {
            cp,
            metric: METRIC.replace("/namespaces/default/", &format!("/namespaces/{ns}/")),
            ns,
            front,
            clients,
            adapter,
            _exporter: exporter,
        }
    }

    fn with_cert(&self, issued: &Issued) -> HttpsClient {
        self.adapter.client_as(issued)
    }

    fn anonymous(&self) -> HttpsClient {
        self.adapter.client()
    }

    /// A Role letting `user` list lobby's External metric in the namespace; returns once the
    /// real authorizer says so.
    async fn allow(&self, user: &str) {
        let role: String = user
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        grant(
            self.cp,
            &self.ns,
            &format!("read-{role}"),
            "- apiGroups: [external.metrics.k8s.io]\n  resources: [hpa_expect_replicas]\n  verbs: [list]",
            ("User", user),
        );
        let attributes = metric_attributes(&self.ns);
        self.cp
            .eventually(&format!("RBAC allows {user}"), || {
                self.cp.allows(user, &[], attributes.clone()).then_some(())
            })
            .await;
    }

    /// The specs of the SubjectAccessReviews the adapter sent about this namespace, oldest
    /// first, from the real API server's audit log (which keeps their bodies).
    fn reviews(&self) -> Vec<Value> {
        self.cp
            .audited(ADAPTER_USER)
            .into_iter()
            .filter(|a| a.resource == "subjectaccessreviews")
            .map(|a| a.request["spec"].clone())
            .filter(|spec| spec["resourceAttributes"]["namespace"] == self.ns.as_str())
            .collect()
    }

    fn last_review(&self) -> Value {
        self.reviews().pop().expect("the adapter sent no review")
    }
}

/// The secure metrics port, with the real API server's TokenReview and SubjectAccessReview
/// (tests/control-plane) and the adapter as the base's service account: anonymous is 401; a
/// client certificate's user is reviewed for `get` on the path itself, so RBAC on the
/// non-resource URL `/metrics` opens `/metrics` and not `/status`, and the other way round.
/// Plain HTTP gets no answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secure_metrics_port_needs_authentication_and_a_review_of_get_on_the_path() {
    let w = Real::start("metrics-port", &["--metrics-secure"]).await;
    let (cp, ns, adapter, clients) = (w.cp, &w.ns, &w.adapter, &w.clients);
    // Users of this test only: the adapter caches review verdicts per user and path.
    let (scraper, viewer, nobody) = (
        format!("prometheus-{ns}"),
        format!("viewer-{ns}"),
        format!("nobody-{ns}"),
    );
    for (user, path) in [(&scraper, "/metrics"), (&viewer, "/status")] {
        cp.apply(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {user}}}\nrules:\n- nonResourceURLs: [\"{path}\"]\n  verbs: [get]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {user}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {user}}}\nsubjects: [{{apiGroup: rbac.authorization.k8s.io, kind: User, name: {user}}}]\n"
        ));
    }
    let metrics_port = |issued: Option<&Issued>| {
        HttpsClient::new(
            adapter.metrics_port,
            &[adapter.pki.ca_der()],
            issued.map(|i| (i.cert_path.as_path(), i.key_path.as_path())),
        )
    };
    let get = |user: &str, path: &'static str| {
        let issued = clients.client(user, user, &[]);
        let client = metrics_port(Some(&issued));
        async move { client.get(path, &[]).await.unwrap() }
    };

    // Anonymous: 401, nothing rendered.
    let (code, body) = metrics_port(None).get("/metrics", &[]).await.unwrap();
    assert_eq!(code, 401, "{body}");
    assert!(!body.contains("hpa_bridge_"), "{body}");
    // Authenticated, no RBAC: 403.
    let (code, body) = get(&nobody, "/metrics").await;
    assert_eq!(code, 403, "{body}");
    assert!(!body.contains("hpa_bridge_"), "{body}");
    // get on /metrics: the metrics, and not the status page (a loopback listener serves it,
    // behind a review of its own path).
    let (code, body) = get(&scraper, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("hpa_bridge_connections{"), "{body}");
    let (code, body) = get(&scraper, "/status").await;
    assert_eq!(code, 403, "{body}");
    // get on /status: the other way round.
    let (code, body) = get(&viewer, "/status").await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"workloads\""), "{body}");
    let (code, _) = get(&viewer, "/metrics").await;
    assert_eq!(code, 403);
    // Plain HTTP gets no answer from a TLS port.
    let mport = adapter.metrics_port;
    let plain = tokio::time::timeout(
        Duration::from_secs(30),
        tokio::task::spawn(async move {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", mport))
                .await
                .unwrap();
            let io = hyper_util::rt::TokioIo::new(tcp);
            let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
            tokio::spawn(conn);
            let req = http::Request::get("/metrics")
                .header("host", "127.0.0.1")
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap();
            sender.send_request(req).await.map(|r| r.status().as_u16())
        }),
    )
    .await
    .expect("the TLS port neither answered nor closed")
    .unwrap();
    assert!(plain.is_err(), "plain HTTP was answered: {plain:?}");
}

/// `hpa-bridge serve` with these flags (plus free ports and no config); the child.
fn serve_with(metrics_bind: &str, extra: &[&str]) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_hpa-bridge"))
        .args(["serve", "--secure-port", &free_port().to_string()])
        .args(["--metrics-bind-address", metrics_bind])
        .args(extra)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn hpa-bridge")
}

/// A plain-HTTP metrics bind off loopback serves /status to anyone who can connect: refused
/// unless asked for, and then without the status pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_port_off_loopback_is_refused_in_the_clear_and_never_shows_status() {
    let port = free_port();
    let out = serve_with(&format!("0.0.0.0:{port}"), &[])
        .wait_with_output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("refusing to serve /metrics over plain HTTP"),
        "{err}"
    );
    // --metrics-secure needs authentication to delegate to.
    let out = serve_with(&format!("127.0.0.1:{port}"), &["--metrics-secure"])
        .wait_with_output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--metrics-secure needs authentication"),
        "{err}"
    );
    // A status listener must be loopback.
    let out = serve_with(
        &format!("127.0.0.1:{port}"),
        &["--status-bind-address", &format!("0.0.0.0:{}", free_port())],
    )
    .wait_with_output()
    .unwrap();
    assert!(!out.status.success());

    // Asked for explicitly: /metrics in the clear, the status pages not at all.
    let status_port = free_port();
    let mut child = serve_with(
        &format!("0.0.0.0:{port}"),
        &[
            "--allow-insecure-metrics-bind",
            "--status-bind-address",
            &format!("127.0.0.1:{status_port}"),
        ],
    );
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        assert!(Instant::now() < deadline, "metrics port never opened");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, body) = plain_http_get(addr, "/metrics").await;
    assert_eq!(code, 200, "{body}");
    for page in ["/status", "/status/anything", "/"] {
        let (code, body) = plain_http_get(addr, page).await;
        assert_eq!(code, 404, "{page}: {body}");
        assert!(body.contains("loopback"), "{body}");
    }
    // The status pages live on their own loopback listener.
    let (code, body) = plain_http_get(
        std::net::SocketAddr::from(([127, 0, 0, 1], status_port)),
        "/status",
    )
    .await;
    assert_eq!(code, 200, "{body}");
    let _ = child.kill();
    let _ = child.wait();
}

/// An Object metric read (custom.metrics.k8s.io) is reviewed with the attributes
/// kube-apiserver's request-info parser derives from the path: `get` on resource
/// `statefulsets.apps`, the object's name, and the metric as the subresource
/// (docs/hpa-behaviour.md §6.6); the review's body is read back from the real API server's
/// audit log. Those are the attributes RBAC rules are written against: a Role granting `get` on
/// `statefulsets.apps/hpa_expect_replicas` of group custom.metrics.k8s.io, named `lobby`, opens
/// exactly that Object metric of exactly that workload, and the HPA controller's built-in role
/// already grants it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_metric_is_reviewed_as_get_on_the_workload_with_the_metric_as_subresource() {
    let w = Real::start(
        "object-rbac",
        &["--authorization-webhook-cache-unauthorized-ttl", "0s"],
    )
    .await;
    let (cp, ns) = (w.cp, &w.ns);
    let user = format!("hpa-{ns}");
    let client = w.with_cert(&w.clients.client("hpa", &user, &[]));
    let path = |version: &str, kind: &str, name: &str, metric: &str| {
        format!("/apis/custom.metrics.k8s.io/{version}/namespaces/{ns}/{kind}/{name}/{metric}")
    };
    let lobby = path(
        "v1beta2",
        "statefulsets.apps",
        "lobby",
        "hpa_expect_replicas",
    );

    let (code, v) = get(&client, &lobby, &[]).await;
    assert_eq!(code, 403, "{v}");
    assert_status(&v, 403, "Forbidden");
    assert_eq!(
        v["message"],
        format!(
            "statefulsets.apps.custom.metrics.k8s.io \"lobby\" is forbidden: User \"{user}\" cannot \
             get resource \"statefulsets.apps/hpa_expect_replicas\" in API group \
             \"custom.metrics.k8s.io\" in the namespace \"{ns}\""
        )
    );
    assert_eq!(
        w.last_review(),
        json!({
            "user": user,
            "groups": ["system:authenticated"],
            "resourceAttributes": {
                "verb": "get",
                "group": "custom.metrics.k8s.io",
                "version": "v1beta2",
                "resource": "statefulsets.apps",
                "name": "lobby",
                "subresource": "hpa_expect_replicas",
                "namespace": ns,
            },
        })
    );
    grant(
        cp,
        ns,
        "object-metric",
        "- apiGroups: [custom.metrics.k8s.io]\n  resources: [statefulsets.apps/hpa_expect_replicas]\n  resourceNames: [lobby]\n  verbs: [get]",
        ("User", &user),
    );
    let v = once_allowed(&client, &lobby).await;
    assert_value_7(200, &v);
    assert_eq!(v["items"][0]["describedObject"]["name"], "lobby", "{v}");
    // Another metric of the same workload, the same metric of another workload or kind, or
    // the v1beta1 path: no. The last is reviewed under its own version.
    for other in [
        path(
            "v1beta2",
            "statefulsets.apps",
            "lobby",
            "hpa_target_replicas",
        ),
        path(
            "v1beta2",
            "statefulsets.apps",
            "arena",
            "hpa_expect_replicas",
        ),
        path(
            "v1beta2",
            "deployments.apps",
            "lobby",
            "hpa_expect_replicas",
        ),
        path("v1beta1", "deployments.apps", "web", "hpa_expect_replicas"),
    ] {
        let (code, v) = get(&client, &other, &[]).await;
        assert_eq!(code, 403, "{other}: {v}");
    }
    let attrs = &w.last_review()["resourceAttributes"];
    assert_eq!(
        (&attrs["version"], &attrs["resource"], &attrs["name"]),
        (&json!("v1beta1"), &json!("deployments.apps"), &json!("web"))
    );

    // The HPA controller's own identity is allowed by the cluster's built-in role.
    let hpa = w.clients.client(
        "hpa-controller",
        "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
        &[
            "system:serviceaccounts",
            "system:serviceaccounts:kube-system",
        ],
    );
    let (code, v) = get(&w.with_cert(&hpa), &lobby, &[]).await;
    assert_value_7(code, &v);
}

/// Anonymous TLS from `source`: sends `head` and reads until the server closes. `Err` when the
/// server refused the connection before or during the handshake.
async fn anonymous_exchange(
    source: std::net::IpAddr,
    port: u16,
    serving: &Pki,
    head: &[u8],
) -> Result<String, String> {
    exchange(source, port, serving, None, head).await
}

/// [`anonymous_exchange`], presenting `client`'s certificate if given.
async fn exchange(
    source: std::net::IpAddr,
    port: u16,
    serving: &Pki,
    client: Option<&Issued>,
    head: &[u8],
) -> Result<String, String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let config = match client {
        Some(c) => client_config(serving)
            .with_client_auth_cert(c.certs(), c.key())
            .unwrap(),
        None => client_config(serving).with_no_client_auth(),
    };
    // A penalized address's handshake is dropped by the kernel (the listener's drop filter):
    // its connect never completes. A loopback connect the kernel accepts completes at once.
    let connect = try_connect_from(source, std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    let tcp = tokio::time::timeout(Duration::from_secs(2), connect)
        .await
        .map_err(|_| "connect dropped".to_string())?
        .map_err(|e| e.to_string())?;
    // A handshake whose last ACK the filter dropped (its address was listed meanwhile) looks
    // connected to the client while the kernel drops its data.
    let handshake = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp);
    let tls = tokio::time::timeout(Duration::from_secs(10), handshake)
        .await
        .map_err(|_| "handshake dropped".to_string())?
        .map_err(|e| e.to_string())?;
    let (mut r, mut w) = tokio::io::split(tls);
    let write = async move {
        let _ = w.write_all(head).await;
        let _ = w.flush().await;
    };
    let read = async move {
        let mut out = Vec::new();
        let _ = r.read_to_end(&mut out).await;
        out
    };
    let exchange = async { tokio::join!(write, read) };
    let ((), out) = tokio::time::timeout(Duration::from_secs(60), exchange)
        .await
        .map_err(|_| "the server neither answered nor closed".to_string())?;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn oversized_head() -> Vec<u8> {
    let mut head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n".to_vec();
    while head.len() < 64 * 1024 {
        head.extend_from_slice(format!("X-Filler: {}\r\n", "a".repeat(1000)).as_bytes());
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// Client addresses that strike out are refused at accept, but not one that got a
/// request past authentication, so a hostile neighbour sharing the aggregator's address cannot
/// get it refused. Health checks and refused (401) requests prove nothing and vouch for nobody.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_address_is_not_refused_for_its_neighbours_misbehaviour() {
    let w = Real::start("penalty", &["--client-penalty-strikes", "2"]).await;
    w.allow("alice").await;
    let proxy = w.front.client("proxy", FRONT_PROXY_CN, &[]);
    let headers = [("X-Remote-User", "alice")];
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    let port = w.adapter.port;
    let (code, v) = get(&w.with_cert(&proxy), &w.metric, &headers).await;
    assert_value_7(code, &v);
    // Oversized heads from the authenticated address: not refused.
    for _ in 0..4 {
        let got = anonymous_exchange(loopback, port, &w.adapter.pki, &oversized_head()).await;
        let got = got.expect("the authenticated address was refused");
        assert!(got.is_empty() || got.starts_with("HTTP/1.1 431"), "{got}");
    }
    let (code, v) = get(&w.with_cert(&proxy), &w.metric, &headers).await;
    assert_value_7(code, &v);

    // Another address that only passed health checks and got a 401 is not trusted.
    let other = std::net::IpAddr::from([127, 0, 0, 9]);
    let health = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let got = anonymous_exchange(other, port, &w.adapter.pki, health).await;
    assert!(got.unwrap().starts_with("HTTP/1.1 200"));
    let denied = format!(
        "GET {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        w.metric
    );
    let got = anonymous_exchange(other, port, &w.adapter.pki, denied.as_bytes()).await;
    assert!(got.unwrap().starts_with("HTTP/1.1 401"));
    for _ in 0..2 {
        let _ = anonymous_exchange(other, port, &w.adapter.pki, &oversized_head()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while anonymous_exchange(other, port, &w.adapter.pki, health)
        .await
        .is_ok()
    {
        assert!(
            Instant::now() < deadline,
            "the untrusted address was never refused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        penalized(&w.adapter).await,
        1.0,
        "only the untrusted address struck out"
    );
    // The aggregator's address is still served.
    let (code, v) = get(&w.with_cert(&proxy), &w.metric, &headers).await;
    assert_value_7(code, &v);
}

/// Addresses struck out so far, on every listener.
async fn penalized(adapter: &AdapterProcess) -> f64 {
    let (_, m) = adapter.plain_get("/metrics").await;
    m.lines()
        .filter(|l| l.starts_with("hpa_bridge_clients_penalized_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Right after a start, before any request has earned its address trust,
/// the front proxy's connections (its requestheader certificate, an allowed name) relaying
/// oversized heads strike nothing: its address stays served, with and without the
/// certificate. The same heads without the certificate strike their address out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_front_proxy_is_never_struck_before_it_has_earned_trust() {
    let w = Real::start("proxy-strikes", &["--client-penalty-strikes", "2"]).await;
    let proxy = w.front.client("proxy", FRONT_PROXY_CN, &[]);
    let port = w.adapter.port;
    let serving = &w.adapter.pki;
    let health = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let aggregator = std::net::IpAddr::from([127, 0, 0, 11]);
    for _ in 0..5 {
        let got = exchange(aggregator, port, serving, Some(&proxy), &oversized_head()).await;
        let got = got.expect("the front proxy's address was refused");
        assert!(got.is_empty() || got.starts_with("HTTP/1.1 431"), "{got}");
    }
    // A strike is counted before its connection closes, so a penalty would be in force now.
    for client in [Some(&proxy), None] {
        let got = exchange(aggregator, port, serving, client, health).await;
        let got = got.unwrap_or_else(|e| {
            panic!(
                "the front proxy's address was refused (certificate: {}): {e}",
                client.is_some()
            )
        });
        assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    }
    assert_eq!(penalized(&w.adapter).await, 0.0);

    // Without the certificate, the same heads strike the address out.
    let anonymous = std::net::IpAddr::from([127, 0, 0, 12]);
    for _ in 0..5 {
        let _ = exchange(anonymous, port, serving, None, &oversized_head()).await;
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while exchange(anonymous, port, serving, None, health)
        .await
        .is_ok()
    {
        assert!(
            Instant::now() < deadline,
            "the anonymous address was never refused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
