//! One real adapter instance (engine, scraper, TLS API on its own port) and the HPA's HTTPS
//! client that polls it (docs/hpa-behaviour.md §1.2).

use super::*;
use hpa_bridge_rules::cluster::{ReplicaSetFacts, WorkloadKind};
use hpa_bridge_server::api::ready::Ready;

/// What discovery would report about the simulated workload.
pub(super) struct SimWorkload {
    pub(super) spec_replicas: AtomicI64,
    /// A Deployment's pods as the watch shows them; `None` for a StatefulSet, whose pods the
    /// adapter knows only from their series.
    pub(super) pods: Mutex<Option<BTreeMap<String, hpa_bridge_rules::cluster::PodFacts>>>,
    /// A Deployment's ReplicaSets as the watch shows them; `None` for a StatefulSet.
    pub(super) replica_sets: Mutex<Option<Vec<ReplicaSetFacts>>>,
    /// The Deployment carries the deletion-cost opt-in annotation.
    pub(super) deletion_cost_opt_in: bool,
}

impl Cluster for SimWorkload {
    fn pods(&self, _namespace: &str) -> Option<hpa_bridge_rules::cluster::PodSet> {
        self.pods.lock().ok()?.clone().map(Arc::new)
    }
    fn deletion_cost_opt_in(&self, w: &WorkloadRef) -> bool {
        self.deletion_cost_opt_in && w.kind == WorkloadKind::Deployment
    }
    fn replica_sets(&self, _w: &WorkloadRef) -> Option<Vec<ReplicaSetFacts>> {
        self.replica_sets.lock().ok()?.clone()
    }
    fn current_replicas(&self, _w: &WorkloadRef) -> Option<u64> {
        Some(self.spec_replicas.load(Ordering::SeqCst).max(0) as u64)
    }
    fn ordinals_start(&self, _w: &WorkloadRef) -> u64 {
        0
    }
}

/// One adapter process: store, scraper, and the TLS API on its own port.
pub(super) struct AdapterInstance {
    /// The API port's readiness, marked after each scrape round.
    pub(super) ready: Ready,
    pub(super) scraper: Scraper,
    /// The target set the simulated pods are written to, as discovery would.
    pub(super) targets: StoreWriter,
    pub(super) server: JoinHandle<()>,
    pub(super) port: u16,
    pub(super) client: Arc<rustls::ClientConfig>,
}

impl Drop for AdapterInstance {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The engine and its scraper, assembled as `serve` assembles them.
fn wire_engine(
    config: Config,
    clock: Arc<ManualClock>,
    workload: Option<Arc<SimWorkload>>,
) -> Result<(Arc<Adapter>, Scraper, StoreWriter), SimulateError> {
    let mut builder = EngineBuilder::new(config, clock).scrape_concurrency(64);
    if let Some(w) = workload {
        builder = builder.cluster(w);
    }
    let engine = builder
        .build()
        .map_err(|e| SimulateError::Io(e.to_string()))?;
    let targets = engine.targets();
    let scraper = engine.scraper().cloned().ok_or_else(|| {
        SimulateError::Io(
            "the simulator scrapes its exporters itself; drop source.prometheus".into(),
        )
    })?;
    Ok((engine.adapter().clone(), scraper, targets))
}

impl AdapterInstance {
    pub(super) async fn start(
        config: Config,
        clock: Arc<ManualClock>,
        workload: Option<Arc<SimWorkload>>,
    ) -> Result<AdapterInstance, SimulateError> {
        let (adapter, scraper, targets) = wire_engine(config, clock, workload)?;
        let cert =
            tls::ServingCert::self_signed(&[]).map_err(|e| SimulateError::Io(e.to_string()))?;
        let mut roots = rustls::RootCertStore::empty();
        for c in cert.certificate_chain() {
            roots
                .add(c)
                .map_err(|e| SimulateError::Io(format!("trusting the serving cert: {e}")))?;
        }
        let client =
            rustls::ClientConfig::builder_with_provider(hpa_bridge_sources::pki::crypto_provider())
                .with_safe_default_protocol_versions()
                .map_err(|e| SimulateError::Io(e.to_string()))?
                .with_root_certificates(roots)
                .with_no_client_auth();
        let server_config =
            Arc::new(tls::server_config(cert, None).map_err(|e| SimulateError::Io(e.to_string()))?);
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| SimulateError::Io(format!("binding the API port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| SimulateError::Io(e.to_string()))?
            .port();
        let handler = Arc::new(ApiHandler::new(adapter));
        let ready = handler.ready().clone();
        let server = tokio::spawn(server::serve_api(listener, server_config, handler, None));
        Ok(AdapterInstance {
            ready,
            scraper,
            targets,
            server,
            port,
            client: Arc::new(client),
        })
    }

    /// One GET as the HPA sends it (docs/hpa-behaviour.md §1.2), turned into the model's input: the
    /// items' values, or the error text. An empty list is an error (docs/hpa-behaviour.md §1.6).
    pub(super) async fn fetch(
        &self,
        namespace: &str,
        metric: &str,
        selector: Option<&str>,
    ) -> MetricInput {
        let path = with_query(
            format!(
                "/apis/external.metrics.k8s.io/v1beta1/namespaces/{namespace}/{}",
                // client-go lower-cases the metric name in the path (docs/hpa-behaviour.md §1.2).
                metric.to_ascii_lowercase()
            ),
            "labelSelector",
            selector,
        );
        let items = self.get_items(&path).await.map_err(|e| match e {
            FetchError::Transport(e) => {
                format!("unable to fetch metrics from external metrics API: {e}")
            }
            FetchError::Status(code, message) => format!("{code}: {message}"),
            FetchError::Decode(code, e) => {
                format!("unable to decode the external metrics API answer ({code}): {e}")
            }
            FetchError::Item(e) => e,
        })?;
        if items.is_empty() {
            return Err("no metrics returned from external metrics API".into());
        }
        Ok(items)
    }

    /// One Object metric GET as the HPA sends it (docs/hpa-behaviour.md §6.2): the path names the
    /// described workload, `metricLabelSelector` narrows. A failed GET is "unable to fetch
    /// metrics from custom metrics API: ..." as the HPA's metrics client words it; the items
    /// go to the model unchanged, which refuses any count but one (§6.2).
    pub(super) async fn fetch_object(
        &self,
        namespace: &str,
        described: &DescribedObject,
        metric: &str,
        selector: Option<&str>,
    ) -> MetricInput {
        let fail = |e: String| format!("unable to fetch metrics from custom metrics API: {e}");
        let kind = ObjectKind::ALL
            .into_iter()
            .find(|k| k.kind() == described.kind)
            .ok_or_else(|| {
                fail(format!(
                    "the server could not find the requested resource (kind {})",
                    described.kind
                ))
            })?;
        let path = with_query(
            format!(
                "/apis/custom.metrics.k8s.io/v1beta2/namespaces/{namespace}/{}/{}/{metric}",
                kind.resource(),
                described.name
            ),
            "metricLabelSelector",
            selector,
        );
        self.get_items(&path).await.map_err(|e| match e {
            FetchError::Transport(e) => fail(e),
            FetchError::Status(code, message) => fail(format!("{code}: {message}")),
            FetchError::Decode(code, e) => {
                format!("unable to decode the custom metrics API answer ({code}): {e}")
            }
            FetchError::Item(e) => e,
        })
    }

    /// The HTTPS GET and its items' values, for either API (both lists carry `items[].value`).
    async fn get_items(&self, path: &str) -> Result<Vec<f64>, FetchError> {
        let (code, body) = https_get(self.port, self.client.clone(), path)
            .await
            .map_err(FetchError::Transport)?;
        let json: serde_json::Value =
            serde_json::from_str(&body).map_err(|e| FetchError::Decode(code, e.to_string()))?;
        if !(200..300).contains(&code) {
            let message = json["message"].as_str().unwrap_or("").to_string();
            return Err(FetchError::Status(code, message));
        }
        let items = json["items"].as_array().cloned().unwrap_or_default();
        items
            .iter()
            .map(|item| {
                let text = item["value"].as_str().unwrap_or("");
                Quantity::parse(text)
                    .map(|q| q.milli_value() as f64 / 1000.0)
                    .map_err(|e| FetchError::Item(format!("unparsable item value {text:?}: {e}")))
            })
            .collect()
    }
}

/// Why a GET gave no values; each API words it in its own way.
enum FetchError {
    Transport(String),
    Status(u16, String),
    Decode(u16, String),
    Item(String),
}

/// `path?name=<percent-encoded selector>`, or `path` without a selector.
fn with_query(mut path: String, name: &str, selector: Option<&str>) -> String {
    if let Some(sel) = selector {
        path.push('?');
        path.push_str(name);
        path.push('=');
        path.push_str(
            &percent_encoding::utf8_percent_encode(sel, percent_encoding::NON_ALPHANUMERIC)
                .to_string(),
        );
    }
    path
}

pub(super) async fn https_get(
    port: u16,
    config: Arc<rustls::ClientConfig>,
    path: &str,
) -> Result<(u16, String), String> {
    let tcp = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").map_err(|e| e.to_string())?;
    let stream = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS: {e}"))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header(http::header::HOST, format!("127.0.0.1:{port}"))
        .header(http::header::ACCEPT, "application/json")
        .body(http_body_util::Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let code = resp.status().as_u16();
    let body = resp
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}
