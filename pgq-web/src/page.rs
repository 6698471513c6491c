//! The page shell every view renders into: head, navigation, banners, and the security headers
//! every HTML response carries.

use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use crate::dashboard::Dashboard;

/// The sections of the navigation, in order. A new page is one more entry here and one more
/// route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Queues,
    Jobs,
    Workers,
    Schedules,
    /// Pages outside the navigation (login, action reports).
    None,
}

const NAV: &[(Section, &str, &str)] = &[
    (Section::Queues, "Queues", "/"),
    (Section::Jobs, "Jobs", "/jobs"),
    (Section::Workers, "Workers", "/workers"),
    (Section::Schedules, "Schedules", "/schedules"),
];

/// Only the dashboard's own scripts, styles and images; no frames, no plugins, forms only to
/// itself. Inline scripts and styles are refused, so an injected tag could not run even if it
/// escaped escaping.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A full page: `title`, the navigation with `section` marked, and `body`.
pub(crate) fn render(
    dashboard: &Dashboard,
    status: StatusCode,
    section: Section,
    title: &str,
    body: Markup,
) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="same-origin";
                title { (title) " · pgq" }
                link rel="stylesheet" href=(dashboard.link("/assets/dashboard.css"));
                script src=(dashboard.link("/assets/dashboard.js")) defer {}
            }
            body {
                header.top {
                    a.brand href=(dashboard.link("/")) { "pgq" }
                    nav {
                        @for (entry, label, path) in NAV {
                            @if *entry == section {
                                a.current href=(dashboard.link(path)) aria-current="page" { (label) }
                            } @else {
                                a href=(dashboard.link(path)) { (label) }
                            }
                        }
                    }
                    @if dashboard.config.read_only {
                        span.badge.readonly title="Actions are disabled" { "read-only" }
                    }
                }
                main { (body) }
            }
        }
    };
    html_response(status, markup.into_string())
}

/// An HTML response with the security headers.
pub(crate) fn html_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CONTENT_SECURITY_POLICY, CSP),
            (CACHE_CONTROL, "no-store"),
        ],
        [
            ("x-content-type-options", "nosniff"),
            ("x-frame-options", "DENY"),
            ("referrer-policy", "same-origin"),
        ],
        body,
    )
        .into_response()
}

/// A small page saying what went wrong.
pub(crate) fn problem(dashboard: &Dashboard, status: StatusCode, message: &str) -> Response {
    let body = html! {
        h1 { (status.canonical_reason().unwrap_or("Error")) }
        p.notice.bad { (message) }
        p { a href=(dashboard.link("/")) { "Back to the queues" } }
    };
    render(dashboard, status, Section::None, "Error", body)
}
