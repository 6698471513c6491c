//! The pages for an address the dashboard does not have, and for a method an address does not
//! answer (a GET of an action): the dashboard's own pages, not the router's empty answers.

use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::Response;

use crate::dashboard::Dashboard;
use crate::page;

/// How much of a hostile address a page repeats.
const SHOWN: usize = 80;

/// Any address no route matches: 404.
pub(crate) async fn no_such_page(State(dashboard): State<Dashboard>, uri: Uri) -> Response {
    let message = format!("this dashboard has no page at {}", shown(&dashboard, &uri));
    page::problem(&dashboard, StatusCode::NOT_FOUND, &message)
}

/// A route asked with a method it does not answer: 405, with the router's `Allow` header.
pub(crate) async fn wrong_method(
    State(dashboard): State<Dashboard>,
    method: Method,
    uri: Uri,
) -> Response {
    let message = format!(
        "{} does not answer {}",
        shown(&dashboard, &uri),
        method.as_str().chars().take(SHOWN).collect::<String>()
    );
    page::problem(&dashboard, StatusCode::METHOD_NOT_ALLOWED, &message)
}

/// The address as the browser asked for it (under the mount prefix), cut short.
fn shown(dashboard: &Dashboard, uri: &Uri) -> String {
    let path = dashboard.link(uri.path());
    if path.chars().count() > SHOWN {
        format!("{}…", path.chars().take(SHOWN).collect::<String>())
    } else {
        path
    }
}
