//! A stand-in for the Kubernetes API for the security tests. No kube-apiserver exists here, so
//! this loopback HTTPS server speaks the real wire format of the three calls a delegated
//! aggregated API server makes: `POST /apis/authentication.k8s.io/v1/tokenreviews`,
//! `POST /apis/authorization.k8s.io/v1/subjectaccessreviews` (both echo the request back with a
//! `status`, as kube-apiserver does) and `GET` of the ConfigMap
//! `kube-system/extension-apiserver-authentication` (a recorded v1 ConfigMap document). It
//! records every request so tests can assert on the exact review objects the adapter sent.

use std::collections::{BTreeMap, HashMap};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{json, Value};
use tokio::net::TcpListener;

use super::Pki;

pub const TOKEN_REVIEWS: &str = "/apis/authentication.k8s.io/v1/tokenreviews";
pub const SUBJECT_ACCESS_REVIEWS: &str = "/apis/authorization.k8s.io/v1/subjectaccessreviews";
pub const AUTH_CONFIGMAP: &str =
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
/// The bearer token the adapter's kubeconfig carries.
pub const ADAPTER_TOKEN: &str = "adapter-serviceaccount-token";

/// One request the fake API server received.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub path: String,
    pub authorization: Option<String>,
    pub body: Value,
}

/// What the fake API server answers.
#[derive(Default)]
pub struct Behaviour {
    /// token -> UserInfo JSON (`username`, `uid`, `groups`, `extra`).
    pub tokens: HashMap<String, Value>,
    /// Answer TokenReviews with this HTTP error instead.
    pub token_review_error: Option<u16>,
    /// Users the SubjectAccessReview allows (for any attributes).
    pub allowed_users: Vec<String>,
    /// Answer SubjectAccessReviews with this HTTP error instead.
    pub access_review_error: Option<u16>,
    /// The ConfigMap's data; `None` answers 404 NotFound.
    pub configmap: Option<BTreeMap<String, String>>,
    /// Answer the ConfigMap GET with 403 Forbidden (the adapter lacks its RoleBinding).
    pub configmap_forbidden: bool,
}

#[derive(Clone)]
pub struct FakeApiServer {
    pub addr: SocketAddr,
    pub pki: Arc<Pki>,
    pub behaviour: Arc<Mutex<Behaviour>>,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
}

fn status(code: u16, reason: &str, message: &str) -> (u16, Value) {
    (
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": message, "reason": reason, "code": code}),
    )
}

impl FakeApiServer {
    pub async fn start() -> Self {
        let pki = Arc::new(Pki::new("fake-kube-apiserver-ca"));
        let server = pki.server();
        let (certs, key) = (server.certs(), server.key());
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let me = FakeApiServer {
            addr,
            pki,
            behaviour: Arc::default(),
            requests: Arc::default(),
        };
        let served = me.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (acceptor, served) = (acceptor.clone(), served.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let svc = service_fn(move |req: http::Request<Incoming>| {
                        let served = served.clone();
                        async move { Ok::<_, Infallible>(served.answer(req).await) }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        me
    }

    async fn answer(&self, req: http::Request<Incoming>) -> http::Response<Full<Bytes>> {
        let method = req.method().to_string();
        let path = req.uri().path().to_string();
        let authorization = req
            .headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let bytes = req.into_body().collect().await.unwrap().to_bytes();
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        self.requests.lock().unwrap().push(Recorded {
            path: path.clone(),
            authorization: authorization.clone(),
            body: body.clone(),
        });
        let (code, out) = if authorization.as_deref() != Some(&format!("Bearer {ADAPTER_TOKEN}")) {
            status(401, "Unauthorized", "Unauthorized")
        } else {
            self.route(&method, &path, body)
        };
        http::Response::builder()
            .status(code)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(serde_json::to_vec(&out).unwrap())))
            .unwrap()
    }

    fn route(&self, method: &str, path: &str, mut body: Value) -> (u16, Value) {
        let b = self.behaviour.lock().unwrap();
        match (method, path) {
            ("POST", TOKEN_REVIEWS) => {
                if let Some(code) = b.token_review_error {
                    return status(code, "InternalError", "etcd is on fire");
                }
                let token = body["spec"]["token"].as_str().unwrap_or("").to_string();
                body["metadata"] = json!({"creationTimestamp": null});
                body["status"] = match b.tokens.get(&token) {
                    Some(user) => json!({"authenticated": true, "user": user,
                                         "audiences": ["https://kubernetes.default.svc.cluster.local"]}),
                    None => {
                        json!({"user": {}, "error": "[invalid bearer token, token lookup failed]"})
                    }
                };
                (201, body)
            }
            ("POST", SUBJECT_ACCESS_REVIEWS) => {
                if let Some(code) = b.access_review_error {
                    return status(code, "InternalError", "webhook authorizer is unreachable");
                }
                let user = body["spec"]["user"].as_str().unwrap_or("").to_string();
                body["metadata"] = json!({"creationTimestamp": null});
                body["status"] = if b.allowed_users.contains(&user) {
                    json!({"allowed": true, "reason": format!("RBAC: allowed by ClusterRoleBinding \"metrics-readers\" of ClusterRole \"external-metrics-reader\" to User \"{user}\"")})
                } else {
                    json!({"allowed": false})
                };
                (201, body)
            }
            ("GET", AUTH_CONFIGMAP) if b.configmap_forbidden => status(
                403,
                "Forbidden",
                "configmaps \"extension-apiserver-authentication\" is forbidden: User \"system:serviceaccount:hpa-bridge:hpa-bridge\" cannot get resource \"configmaps\" in API group \"\" in the namespace \"kube-system\"",
            ),
            ("GET", AUTH_CONFIGMAP) => match &b.configmap {
                Some(data) => (
                    200,
                    json!({
                        "kind": "ConfigMap",
                        "apiVersion": "v1",
                        "metadata": {
                            "name": "extension-apiserver-authentication",
                            "namespace": "kube-system",
                            "uid": "5e1c8f7a-2f0b-4a53-9d0e-8d1f1b2a9c11",
                            "resourceVersion": "4711",
                            "creationTimestamp": "2025-01-07T09:12:44Z"
                        },
                        "data": data,
                    }),
                ),
                None => status(
                    404,
                    "NotFound",
                    "configmaps \"extension-apiserver-authentication\" not found",
                ),
            },
            _ => status(
                404,
                "NotFound",
                "the server could not find the requested resource",
            ),
        }
    }

    /// A kubeconfig for this server: its CA, and a bearer token for the adapter itself.
    pub fn kubeconfig(&self) -> PathBuf {
        let path = self.pki.dir.path().join("kubeconfig.yaml");
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:{}\n    certificate-authority: {}\nusers:\n- name: adapter\n  user:\n    token: {ADAPTER_TOKEN}\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: adapter\ncurrent-context: fake\n",
                self.addr.port(),
                self.pki.ca_path().display()
            ),
        )
        .unwrap();
        path
    }

    pub fn set(&self, f: impl FnOnce(&mut Behaviour)) {
        f(&mut self.behaviour.lock().unwrap());
    }

    pub fn recorded(&self, path: &str) -> Vec<Recorded> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    pub fn count(&self, path: &str) -> usize {
        self.recorded(path).len()
    }

    pub fn last_review(&self, path: &str) -> Value {
        self.recorded(path)
            .last()
            .unwrap_or_else(|| panic!("no request to {path}"))
            .body
            .clone()
    }
}
