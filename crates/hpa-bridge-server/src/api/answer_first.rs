//! The shape of the layers that answer some requests themselves before the service below sees
//! them (readiness, health, the metrics port's open pages): their answer, ready at once, or the
//! inner service's, without an allocation.

use std::task::{Context, Poll};

use futures::future::{ready, Either, Ready};
use tower::Service;

use super::response::ApiResponse;
use super::Routed;

/// A layer's own answers.
pub trait AnswerFirst {
    /// The answer to `req`, when this layer gives it instead of the service below.
    fn answer<B>(&self, req: &Routed<B>) -> Option<ApiResponse>;
}

/// `inner`, behind the answers of `first`.
#[derive(Clone, Debug)]
pub struct AnswerFirstService<S, A> {
    inner: S,
    first: A,
}

impl<S, A> AnswerFirstService<S, A> {
    pub fn new(inner: S, first: A) -> Self {
        AnswerFirstService { inner, first }
    }
}

impl<S, A, B> Service<Routed<B>> for AnswerFirstService<S, A>
where
    S: Service<Routed<B>, Response = ApiResponse>,
    A: AnswerFirst,
{
    type Response = ApiResponse;
    type Error = S::Error;
    type Future = Either<Ready<Result<ApiResponse, S::Error>>, S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Routed<B>) -> Self::Future {
        match self.first.answer(&req) {
            Some(answer) => Either::Left(ready(Ok(answer))),
            None => Either::Right(self.inner.call(req)),
        }
    }
}
