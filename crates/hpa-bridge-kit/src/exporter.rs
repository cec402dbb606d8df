//! A real HTTP exporter on loopback: pages by path, each with a status and a delay, changed while
//! the adapter scrapes. The tests run one per test; the bench runs one in a child process with a
//! page per target, listening on one address per target as pods have.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// What one exporter path does.
#[derive(Clone, Debug)]
pub struct Behaviour {
    pub body: Bytes,
    pub status: u16,
    pub delay: Duration,
}

impl Behaviour {
    pub fn ok(body: impl Into<String>) -> Self {
        Behaviour {
            body: Bytes::from(body.into()),
            status: 200,
            delay: Duration::ZERO,
        }
    }

    fn refusal(status: u16, body: &'static str) -> Self {
        Behaviour {
            body: Bytes::from_static(body.as_bytes()),
            status,
            delay: Duration::ZERO,
        }
    }
}

type Pages = Arc<RwLock<HashMap<String, Behaviour>>>;

/// A real HTTP exporter on loopback whose pages the caller changes while the adapter scrapes.
#[derive(Clone)]
pub struct TestExporter {
    pub addr: SocketAddr,
    pages: Pages,
    /// Paths that answer 401 unless the request carries this `Authorization` header.
    authorization: Arc<Mutex<HashMap<String, String>>>,
    stopped: Arc<watch::Sender<bool>>,
}

impl TestExporter {
    pub async fn start() -> Self {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap()
    }

    /// An exporter on `addr`: a pod's own address in 127.1.0.0/16 on the control plane.
    pub async fn start_on(addr: SocketAddr) -> std::io::Result<Self> {
        Self::start_on_all(&[addr.ip()], addr.port()).await
    }

    /// One exporter listening on every one of `ips` at one port (`port`, or one free on the
    /// first address), serving the same pages on each; `addr` is the first.
    pub async fn start_on_all(ips: &[IpAddr], port: u16) -> std::io::Result<Self> {
        let (first, rest) = ips.split_first().expect("an address to listen on");
        let listener = TcpListener::bind((*first, port)).await?;
        let addr = listener.local_addr()?;
        let mut listeners = vec![listener];
        for ip in rest {
            listeners.push(TcpListener::bind((*ip, addr.port())).await?);
        }
        let exporter = TestExporter {
            addr,
            pages: Arc::default(),
            authorization: Arc::default(),
            stopped: Arc::new(watch::channel(false).0),
        };
        for listener in listeners {
            let (pages, authorization) = (exporter.pages.clone(), exporter.authorization.clone());
            tokio::spawn(serve_each(
                listener,
                exporter.stopped.subscribe(),
                move |req| {
                    let path = req.uri().path();
                    let wanted = authorization.lock().unwrap().get(path).cloned();
                    let sent = req.headers().get(http::header::AUTHORIZATION);
                    let b = match wanted {
                        Some(w) if sent.is_none_or(|s| s.as_bytes() != w.as_bytes()) => {
                            Behaviour::refusal(401, "unauthorized\n")
                        }
                        _ => pages
                            .read()
                            .unwrap()
                            .get(path)
                            .cloned()
                            .unwrap_or_else(|| Behaviour::refusal(404, "no such page\n")),
                    };
                    async move {
                        if !b.delay.is_zero() {
                            tokio::time::sleep(b.delay).await;
                        }
                        http::Response::builder()
                            .status(b.status)
                            .header("content-type", "text/plain; version=0.0.4")
                            .body(Full::new(b.body))
                            .unwrap()
                    }
                },
            ));
        }
        Ok(exporter)
    }

    /// The exporter disappears: the listeners close and open (keep-alive) connections drop, so
    /// scrapers see connection refused.
    pub fn stop(&self) {
        let _ = self.stopped.send(true);
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn set(&self, path: &str, b: Behaviour) {
        self.pages.write().unwrap().insert(path.into(), b);
    }

    pub fn page(&self, path: &str, body: impl Into<String>) {
        self.set(path, Behaviour::ok(body));
    }

    /// `path` answers 401 to a request without exactly this `Authorization` header value.
    pub fn require_authorization(&self, path: &str, value: &str) {
        self.authorization
            .lock()
            .unwrap()
            .insert(path.into(), value.into());
    }
}

/// Serve every connection `listener` accepts (HTTP/1.1 or h2c) with `respond`, until `stop`
/// turns true: then the listener closes and open connections drop.
pub async fn serve_each<F, Fut>(listener: TcpListener, mut stop: watch::Receiver<bool>, respond: F)
where
    F: Fn(http::Request<Incoming>) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = http::Response<Full<Bytes>>> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => return,
        };
        let Ok((tcp, _)) = accepted else {
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let respond = respond.clone();
        let mut conn_stop = stop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: http::Request<Incoming>| {
                let response = respond(req);
                async move { Ok::<_, Infallible>(response.await) }
            });
            let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            let conn = builder.serve_connection(TokioIo::new(tcp), service);
            tokio::select! {
                _ = conn => {}
                _ = conn_stop.wait_for(|s| *s) => {}
            }
        });
    }
}
