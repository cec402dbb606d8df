//! Responses of the API port: JSON bodies, Kubernetes `Status` failures and plain text. Every
//! response is `application/json` but the probes', whatever the request asked for.

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::json;

pub type ApiResponse = Response<Full<Bytes>>;

/// Reasons and codes used on the wire (docs/hpa-behaviour.md §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatusReason {
    BadRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    InternalError,
    ServiceUnavailable,
}

impl StatusReason {
    pub fn code(self) -> u16 {
        match self {
            StatusReason::BadRequest => 400,
            StatusReason::Unauthorized => 401,
            StatusReason::Forbidden => 403,
            StatusReason::NotFound => 404,
            StatusReason::MethodNotAllowed => 405,
            StatusReason::InternalError => 500,
            StatusReason::ServiceUnavailable => 503,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            StatusReason::BadRequest => "BadRequest",
            StatusReason::Unauthorized => "Unauthorized",
            StatusReason::Forbidden => "Forbidden",
            StatusReason::NotFound => "NotFound",
            StatusReason::MethodNotAllowed => "MethodNotAllowed",
            StatusReason::InternalError => "InternalError",
            StatusReason::ServiceUnavailable => "ServiceUnavailable",
        }
    }
}

pub fn json_response(code: u16, body: &impl serde::Serialize) -> ApiResponse {
    // Room for a typical response (a custom metrics list, a Status), which `to_vec` would grow
    // more than once to hold.
    let mut bytes = Vec::with_capacity(512);
    if serde_json::to_writer(&mut bytes, body).is_err() {
        bytes = b"{}".to_vec();
    }
    bytes_response(code, Bytes::from(bytes))
}

pub(crate) fn bytes_response(code: u16, bytes: Bytes) -> ApiResponse {
    use http::HeaderValue;
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )
        .header(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, private"),
        )
        .body(Full::new(bytes))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// The body of a Kubernetes `Status` failure.
pub(crate) fn status_body(reason: StatusReason, message: &str) -> Bytes {
    let status = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason.as_str(),
        "code": reason.code(),
    });
    Bytes::from(serde_json::to_vec(&status).unwrap_or_else(|_| b"{}".to_vec()))
}

/// A Kubernetes `Status` failure; the HTTP status equals `code`.
pub fn status_response(reason: StatusReason, message: &str) -> ApiResponse {
    let mut resp = bytes_response(reason.code(), status_body(reason, message));
    if reason == StatusReason::Unauthorized {
        resp.headers_mut().insert(
            http::header::WWW_AUTHENTICATE,
            http::HeaderValue::from_static("Bearer realm=\"hpa-bridge\""),
        );
    }
    resp
}

pub fn plain(code: u16, text: &'static str) -> ApiResponse {
    Response::builder()
        .status(StatusCode::from_u16(code).unwrap_or(StatusCode::OK))
        .header(http::header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(text.as_bytes())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}
