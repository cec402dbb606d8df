//! The request self-metrics: every answer the handler gives is counted by code and metric with
//! its duration, and every refusal of the gate by code and metric (`authentication`), for
//! External and Object paths alike. The
//! metric label is a configured metric or `-`, so callers cannot grow the label set.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Instant;

use http::Method;
use tower::{Layer, Service};

use super::response::ApiResponse;
use super::{Route, Routed};
use hpa_bridge_engine::engine::Adapter;
use hpa_bridge_telemetry::self_metrics::SelfMetrics;

/// A request's label in the self-metrics: which configured metric it asked for, or none
/// (`-`). Held as a position among the served metrics rather than a borrowed name, so the
/// request chain can keep it across the answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MetricLabel(Option<usize>);

impl MetricLabel {
    /// `-`: no configured metric.
    pub const NONE: MetricLabel = MetricLabel(None);
}

/// The request counters of the API port.
#[derive(Clone)]
pub struct RequestMetrics {
    metrics: Arc<SelfMetrics>,
    /// The served metrics, as configured: the only label values besides `-`.
    served: Arc<[String]>,
}

impl RequestMetrics {
    pub fn new(adapter: Arc<Adapter>) -> Self {
        RequestMetrics {
            metrics: adapter.self_metrics(),
            served: adapter.served_metric_names().into(),
        }
    }

    /// Count a request the gate refused with `code`, with a zero duration; it is labelled by
    /// the metric its path names, External or Object, whatever its method.
    pub fn refused(&self, route: &Route, code: u16) {
        self.record(code, self.named_metric(route), 0.0);
    }

    fn record(&self, code: u16, metric: MetricLabel, seconds: f64) {
        let name = metric.0.and_then(|i| self.served.get(i));
        let name = name.map_or("-", String::as_str);
        self.metrics.request(code, name, seconds);
    }

    /// The label for `requested`: a served metric (names match without regard to case), or
    /// `-` for anything else, so unauthenticated or mistaken requests cannot grow the label
    /// set without bound.
    fn label(&self, requested: &str) -> MetricLabel {
        let position = self
            .served
            .iter()
            .position(|m| m.eq_ignore_ascii_case(requested));
        MetricLabel(position)
    }

    /// The metric an answered request counts under: the configured metric its path names, for
    /// a read of either API.
    fn answered<B>(&self, req: &Routed<B>) -> MetricLabel {
        let method = req.req.method();
        if method != Method::GET && method != Method::HEAD {
            return MetricLabel::NONE;
        }
        self.named_metric(&req.route)
    }

    /// The configured metric a path names: an External metric's, or an Object metric's
    /// (`namespaces/{ns}/{resource}/{name}/{metric}`); `-` for anything else.
    fn named_metric(&self, route: &Route) -> MetricLabel {
        match route {
            Route::ExternalMetric(_, metric) => self.label(metric),
            Route::CustomMetrics(path) => path
                .object_metric()
                .map_or(MetricLabel::NONE, |p| self.label(p.metric)),
            _ => MetricLabel::NONE,
        }
    }
}

/// The layer counting each answer of the service below it.
#[derive(Clone)]
pub struct RecordRequest {
    metrics: RequestMetrics,
}

impl RecordRequest {
    pub fn new(metrics: RequestMetrics) -> Self {
        RecordRequest { metrics }
    }
}

impl<S> Layer<S> for RecordRequest {
    type Service = RecordRequestService<S>;

    fn layer(&self, inner: S) -> RecordRequestService<S> {
        RecordRequestService {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

#[derive(Clone)]
pub struct RecordRequestService<S> {
    inner: S,
    metrics: RequestMetrics,
}

impl<S, B> Service<Routed<B>> for RecordRequestService<S>
where
    S: Service<Routed<B>, Response = ApiResponse>,
{
    type Response = ApiResponse;
    type Error = S::Error;
    type Future = Recording<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Routed<B>) -> Self::Future {
        let metric = self.metrics.answered(&req);
        Recording {
            started: Instant::now(),
            answer: self.inner.call(req),
            metrics: self.metrics.clone(),
            metric,
        }
    }
}

pin_project_lite::pin_project! {
    /// An answer on its way, counted when it is ready.
    pub struct Recording<F> {
        #[pin]
        answer: F,
        metrics: RequestMetrics,
        metric: MetricLabel,
        started: Instant,
    }
}

impl<F, E> Future for Recording<F>
where
    F: Future<Output = Result<ApiResponse, E>>,
{
    type Output = Result<ApiResponse, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answer = ready!(this.answer.poll(cx));
        if let Ok(resp) = &answer {
            this.metrics.record(
                resp.status().as_u16(),
                *this.metric,
                this.started.elapsed().as_secs_f64(),
            );
        }
        Poll::Ready(answer)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::Method;

    use crate::api::tests::{ask_api, default_handler, request, requests_counted};
    use crate::api::transport::shutdown::Shutdown;

    /// Every answer is counted by its code and the configured metric a read asked for; a write
    /// counts under `-`, whatever path it names.
    #[tokio::test]
    async fn every_answer_is_counted_by_code_and_metric() {
        let handler = Arc::new(default_handler());
        let metric = handler.adapter.served_metric_names()[0].clone();
        let shutdown = Shutdown::new();
        let external = format!("/apis/external.metrics.k8s.io/v1beta1/namespaces/default/{metric}");
        let object = format!(
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/statefulsets.apps/lobby/{metric}"
        );
        let mut codes = Vec::new();
        for (method, path) in [
            (Method::GET, external.as_str()),
            (Method::GET, object.as_str()),
            (Method::POST, external.as_str()),
            (Method::GET, "/apis/unknown"),
        ] {
            let resp = ask_api(&handler, None, &shutdown, request(method, path, false)).await;
            codes.push(resp.status().as_u16());
        }
        assert_eq!(codes[2], 405);
        assert_eq!(codes[3], 404);
        let adapter = &handler.adapter;
        let on_metric = if codes[0] == codes[1] { 2.0 } else { 1.0 };
        assert_eq!(requests_counted(adapter, codes[0], &metric), on_metric);
        assert_eq!(requests_counted(adapter, codes[1], &metric), on_metric);
        assert_eq!(requests_counted(adapter, 405, "-"), 1.0);
        assert_eq!(requests_counted(adapter, 404, "-"), 1.0);
    }
}
