//! HEAD: the GET answer's status and headers, with its length, and no body. hyper drops the
//! body of a HEAD answer on HTTP/1.1 but sends it on HTTP/2, where strict clients fail on the
//! unexpected DATA.

use std::task::{Context, Poll};

use bytes::Bytes;
use futures::future::{Either, FutureExt, Map};
use http::Request;
use http_body_util::Full;
use tower::{Layer, Service};

use super::response::ApiResponse;

/// The layer answering HEAD as GET without the body.
#[derive(Clone, Copy, Debug, Default)]
pub struct Head;

impl<S> Layer<S> for Head {
    type Service = HeadService<S>;

    fn layer(&self, inner: S) -> HeadService<S> {
        HeadService(inner)
    }
}

#[derive(Clone, Debug)]
pub struct HeadService<S>(S);

type Strip<E> = fn(Result<ApiResponse, E>) -> Result<ApiResponse, E>;

impl<S, B> Service<Request<B>> for HeadService<S>
where
    S: Service<Request<B>, Response = ApiResponse>,
{
    type Response = ApiResponse;
    type Error = S::Error;
    type Future = Either<S::Future, Map<S::Future, Strip<S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        if req.method() == http::Method::HEAD {
            Either::Right(self.0.call(req).map(strip as Strip<S::Error>))
        } else {
            Either::Left(self.0.call(req))
        }
    }
}

fn strip<E>(answer: Result<ApiResponse, E>) -> Result<ApiResponse, E> {
    answer.map(without_body)
}

fn without_body(resp: ApiResponse) -> ApiResponse {
    use hyper::body::Body;
    let (mut parts, body) = resp.into_parts();
    if let Some(len) = body.size_hint().exact() {
        parts
            .headers
            .insert(http::header::CONTENT_LENGTH, http::HeaderValue::from(len));
    }
    http::Response::from_parts(parts, Full::new(Bytes::new()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use http::Method;

    use crate::api::tests::{ask_api, default_handler, request, response_bytes};
    use crate::api::transport::shutdown::Shutdown;

    /// A HEAD request gets the GET answer's status, headers and length, and no body.
    #[tokio::test]
    async fn a_head_request_gets_the_get_answer_without_its_body() {
        let handler = Arc::new(default_handler());
        let shutdown = Shutdown::new();
        let path = "/apis/external.metrics.k8s.io/v1beta1";
        let get = ask_api(&handler, None, &shutdown, request(Method::GET, path, false)).await;
        let head = ask_api(
            &handler,
            None,
            &shutdown,
            request(Method::HEAD, path, false),
        )
        .await;
        let body = response_bytes(&get).unwrap();
        assert!(!body.is_empty());
        assert_eq!(head.status(), get.status());
        assert_eq!(
            head.headers()[http::header::CONTENT_TYPE],
            get.headers()[http::header::CONTENT_TYPE]
        );
        assert_eq!(
            head.headers()[http::header::CONTENT_LENGTH],
            body.len().to_string().as_str()
        );
        assert_eq!(response_bytes(&head).unwrap_or_default().len(), 0);
    }
}
