//! Loopback exporters: one HTTP server per pod or controller, serving the page the scenario's
//! timeline gives at the current simulated time.

use super::*;

/// What an exporter does with the next request.
#[derive(Clone, Debug)]
pub(super) enum Page {
    Ok(String),
    Status(u16),
    Slow(String, Duration),
    Down,
}

/// A real HTTP exporter on its own loopback port, like a pod's metrics endpoint.
pub(super) struct Exporter {
    pub(super) url: String,
    pub(super) page: Arc<Mutex<Page>>,
    pub(super) task: JoinHandle<()>,
}

#[derive(Debug, thiserror::Error)]
#[error("exporter is down")]
pub(super) struct ExporterDown;

impl Exporter {
    pub(super) async fn start() -> Result<Exporter, SimulateError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| SimulateError::Io(format!("binding an exporter: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| SimulateError::Io(e.to_string()))?;
        let page = Arc::new(Mutex::new(Page::Ok(String::new())));
        let shared = page.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                let now = shared.lock().unwrap_or_else(|e| e.into_inner()).clone();
                if matches!(now, Page::Down) {
                    drop(tcp);
                    continue;
                }
                let shared = shared.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |_req: http::Request<Incoming>| {
                        let page = shared.lock().unwrap_or_else(|e| e.into_inner()).clone();
                        async move { respond(page).await }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), svc)
                        .await;
                });
            }
        });
        Ok(Exporter {
            url: format!("http://{addr}/metrics"),
            page,
            task,
        })
    }

    pub(super) fn set(&self, page: Page) {
        *self.page.lock().unwrap_or_else(|e| e.into_inner()) = page;
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(super) async fn respond(page: Page) -> Result<http::Response<Full<Bytes>>, ExporterDown> {
    let (status, body) = match page {
        // A service error makes hyper close the connection without a response.
        Page::Down => return Err(ExporterDown),
        Page::Ok(body) => (200, body),
        Page::Status(code) => (code, "internal error\n".to_string()),
        Page::Slow(body, delay) => {
            tokio::time::sleep(delay).await;
            (200, body)
        }
    };
    Ok(http::Response::builder()
        .status(status)
        .header("content-type", "text/plain; version=0.0.4")
        .body(Full::new(Bytes::from(body)))
        .unwrap_or_default())
}
