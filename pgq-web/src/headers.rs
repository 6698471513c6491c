//! The headers every response carries, not only pages: assets, live streams, redirects and the
//! answers of the access check.

use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS};
use axum::response::Response;

/// Adds what a response does not set itself: the assets keep their own caching.
pub(crate) async fn security(mut response: Response) -> Response {
    let headers = response.headers_mut();
    for (name, value) in [
        (X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (X_FRAME_OPTIONS, "DENY"),
        (REFERRER_POLICY, "same-origin"),
        (CACHE_CONTROL, "no-store"),
    ] {
        headers
            .entry(name)
            .or_insert(HeaderValue::from_static(value));
    }
    response
}
