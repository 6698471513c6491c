//! The stylesheet and script, embedded in the binary and served from the dashboard's own
//! routes: no build step, no other host.

use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::IntoResponse;

const CSS: &str = include_str!("../assets/dashboard.css");
const JS: &str = include_str!("../assets/dashboard.js");

/// `GET /assets/dashboard.css`.
pub(crate) async fn css() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/css; charset=utf-8"),
            (CACHE_CONTROL, "max-age=300"),
        ],
        CSS,
    )
}

/// `GET /assets/dashboard.js`.
pub(crate) async fn js() -> impl IntoResponse {
    (
        [
            (CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (CACHE_CONTROL, "max-age=300"),
        ],
        JS,
    )
}
