//! The kit's loopback API server (hpa-bridge-kit's kube_api) over real TLS with a CA generated
//! here, a bearer token, and a kubeconfig that trusts both, as a kube client meets a cluster:
//! for discovery's and the deletion-cost writer's faults (kubernetes.rs) and the delegated
//! reviews' (auth.rs).

use std::path::PathBuf;
use std::sync::Arc;

use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The bearer token of the kubeconfig (the adapter's own, as a pod's service account).
pub const TOKEN: &str = "discovery-test-token";

#[derive(Clone)]
pub struct KubeApi {
    api: hpa_bridge_kit::kube_api::KubeApi,
    pub addr: std::net::SocketAddr,
    pub dir: Arc<tempfile::TempDir>,
}

impl std::ops::Deref for KubeApi {
    type Target = hpa_bridge_kit::kube_api::KubeApi;
    fn deref(&self) -> &Self::Target {
        &self.api
    }
}

impl KubeApi {
    /// Start the server with a fresh CA, and write a kubeconfig that trusts it.
    pub async fn start() -> Self {
        let pki = crate::common::Pki::new("test-kube-apiserver-ca");
        let server = pki.server();
        let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(server.certs(), server.key())
        .unwrap();
        // As kube-apiserver: HTTP/2 when the client offers it.
        tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let ca_path = dir.path().join("ca.crt");
        std::fs::copy(pki.ca_path(), &ca_path).unwrap();
        std::fs::write(
            dir.path().join("kubeconfig"),
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: https://{addr}\n    certificate-authority: {}\n\
                 users:\n- name: hpa-bridge\n  user:\n    token: {TOKEN}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: hpa-bridge\n\
                 current-context: test\n",
                ca_path.display()
            ),
        )
        .unwrap();
        let api = hpa_bridge_kit::kube_api::KubeApi::new(Some(TOKEN));
        let served = api.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let (served, acceptor) = (served.clone(), acceptor.clone());
                tokio::spawn(async move {
                    if let Ok(tls) = acceptor.accept(tcp).await {
                        served.serve_connection(TokioIo::new(tls)).await;
                    }
                });
            }
        });
        KubeApi {
            api,
            addr,
            dir: Arc::new(dir),
        }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// A kubeconfig whose requests the server records as `caller`'s.
    pub fn kubeconfig_as(&self, caller: &str) -> PathBuf {
        let path = self.dir.path().join(format!("kubeconfig-{caller}"));
        let text = std::fs::read_to_string(self.kubeconfig()).unwrap().replace(
            &format!("token: {TOKEN}"),
            &format!("token: {TOKEN}-{caller}"),
        );
        std::fs::write(&path, text).unwrap();
        path
    }
}
