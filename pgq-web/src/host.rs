//! Answering only requests addressed to this host by a loopback name
//! ([`DashboardConfig::loopback_only`](crate::DashboardConfig::loopback_only)). A dashboard on a
//! loopback address without a token can be reached by any page the browser opens, under a name
//! of that page's own that resolves there (DNS rebinding); such a request names another host.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::header::HOST;
use axum::middleware::Next;
use axum::response::Response;

use crate::dashboard::Dashboard;
use crate::page;

/// Passes requests whose `Host` (or absolute URI) names this host's loopback interface; answers
/// others 421 with a page of the dashboard's own.
pub(crate) async fn addressed_to_this_host(
    State(dashboard): State<Dashboard>,
    request: Request,
    next: Next,
) -> Response {
    if !dashboard.config.loopback_only {
        return next.run(request).await;
    }
    let host = request
        .headers()
        .get(HOST)
        .and_then(|host| host.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if host.is_some_and(is_loopback_name) {
        return next.run(request).await;
    }
    page::problem(
        &dashboard,
        StatusCode::MISDIRECTED_REQUEST,
        "this dashboard answers only requests addressed to localhost, 127.0.0.1 or [::1]; \
         served with an access token (pgq web --token, or PGQ_WEB_TOKEN), it answers other names",
    )
}

/// Whether `host` (a `Host` header: a name or address, maybe with a port) names this host's
/// loopback interface.
fn is_loopback_name(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        // `[::1]:8080`, `[::1]`, `localhost:8080`; a bare IPv6 address has more colons.
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !name.ends_with(':') => {
            name
        }
        _ => host,
    };
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::is_loopback_name;

    #[test]
    fn only_loopback_names_are_this_host() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.1.2.3:1",
            "[::1]",
            "[::1]:8080",
        ] {
            assert!(is_loopback_name(host), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "10.0.0.1:8080",
            "[::2]:8080",
            "",
            "127.0.0.1:80x",
        ] {
            assert!(!is_loopback_name(host), "{host}");
        }
    }
}
