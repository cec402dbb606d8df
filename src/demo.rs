//! A small exporter whose values change over time, so the local demo shows real movement.
//!
//! It plays one stateful workload: a leading controller whose recommendation follows a slow
//! triangle wave, a former controller still exporting an old value (so max-not-sum is
//! visible), and one endpoint per pod exporting `hpa_stateful_index`, where pods give up their
//! state a quarter period after the recommendation falls (so the floor is visible).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;

/// The local demo's configuration (`serve --demo`): the file the README runs, built in so the
/// image can run the demo without a mounted file.
pub const LOCAL_CONFIG: &str = include_str!("../examples/local.yaml");

#[derive(Clone, Debug)]
pub struct DemoWorkload {
    pub workload: String,
    pub pods: u32,
    pub period: Duration,
}

impl DemoWorkload {
    /// Recommendation at `t`: a triangle wave between 1 and `pods`.
    pub fn recommendation(&self, t: Duration) -> u32 {
        let period = self.period.as_secs_f64().max(1.0);
        let phase = (t.as_secs_f64() % period) / period;
        let tri = if phase < 0.5 {
            phase * 2.0
        } else {
            2.0 - phase * 2.0
        };
        1 + (tri * f64::from(self.pods.saturating_sub(1))).round() as u32
    }

    /// Pods holding state lag the recommendation by a quarter period.
    pub fn holding(&self, t: Duration) -> u32 {
        let lag = self.period / 4;
        self.recommendation(t.saturating_sub(lag))
            .max(self.recommendation(t))
    }

    pub fn page(&self, path: &str, t: Duration) -> Option<String> {
        let w = &self.workload;
        let common = format!(
            "hpa_target_kind=\"StatefulSet\",hpa_target_name=\"{w}\",hpa_target_api_version=\"apps/v1\",service_name=\"{w}\""
        );
        let header = "# HELP hpa_expect_replicas Expected replicas from the service's own controller\n# TYPE hpa_expect_replicas gauge\n";
        match path {
            "/controller/leader" => Some(format!(
                "{header}hpa_expect_replicas{{{common},service_instance_id=\"{w}-0\"}} {}\n",
                self.recommendation(t)
            )),
            "/controller/former" => Some(format!(
                "{header}hpa_expect_replicas{{{common},service_instance_id=\"{w}-1\"}} 1\n"
            )),
            _ => {
                let i: u32 = path.strip_prefix("/pods/")?.parse().ok()?;
                if i >= self.pods {
                    return None;
                }
                let index = if i < self.holding(t) { i + 1 } else { 0 };
                Some(format!(
                    "# HELP hpa_stateful_index One-based pod index while it holds state, else 0\n# TYPE hpa_stateful_index gauge\nhpa_stateful_index{{{common},service_instance_id=\"{w}-{i}\"}} {index}\n"
                ))
            }
        }
    }
}

/// Serve the demo workload on `listener` until the process ends.
pub async fn serve(listener: TcpListener, demo: DemoWorkload) {
    let started = Instant::now();
    let demo = Arc::new(demo);
    loop {
        let Ok((tcp, _)) = listener.accept().await else {
            continue;
        };
        let demo = demo.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: http::Request<Incoming>| {
                let page = demo.page(req.uri().path(), started.elapsed());
                async move {
                    let resp = match page {
                        Some(body) => http::Response::builder()
                            .header(http::header::CONTENT_TYPE, "text/plain; version=0.0.4")
                            .body(Full::new(Bytes::from(body))),
                        None => http::Response::builder().status(404).body(Full::new(
                            Bytes::from_static(
                                b"try /controller/leader, /controller/former or /pods/N\n",
                            ),
                        )),
                    };
                    Ok::<_, Infallible>(resp.unwrap_or_default())
                }
            });
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tcp), service)
                .await;
        });
    }
}

pub async fn bind(addr: &str) -> std::io::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    Ok((listener, local))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_lags_the_recommendation() {
        let d = DemoWorkload {
            workload: "lobby".into(),
            pods: 6,
            period: Duration::from_secs(120),
        };
        assert_eq!(d.recommendation(Duration::ZERO), 1);
        assert_eq!(d.recommendation(Duration::from_secs(60)), 6);
        // Falling: at 90 s the recommendation is ~4 but pods 0..5 still hold state.
        assert!(d.holding(Duration::from_secs(90)) > d.recommendation(Duration::from_secs(90)));
        let page = d.page("/pods/0", Duration::from_secs(60)).unwrap();
        assert!(
            page.contains("hpa_stateful_index{") && page.ends_with(" 1\n"),
            "{page}"
        );
        assert!(d.page("/pods/6", Duration::ZERO).is_none());
    }
}
