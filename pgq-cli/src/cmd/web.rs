//! `pgq web`: the dashboard, served on its own until interrupted.

use std::io::Write as _;
use std::net::IpAddr;
use std::process::ExitCode;
use std::time::Duration;

use axum::extract::Request;
use axum::http::StatusCode;
use axum::http::header::HOST;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use pgq_web::{DashboardConfig, PayloadView};

use crate::args::{Global, WebArgs};
use crate::connect;
use crate::failure::{Failure, Outcome};

/// Connections the dashboard may use: its pages run a few statements at once, and each open job
/// page follows its job on a listening connection of its own.
const WEB_CONNECTIONS: u32 = 10;

pub(crate) async fn run(global: &Global, args: &WebArgs) -> Outcome {
    let config = config(args)?;
    let client = connect::client_with(global, WEB_CONNECTIONS).await?;
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .map_err(|err| Failure::Failed(format!("cannot listen on {}: {err}", args.bind)))?;
    let addr = listener
        .local_addr()
        .map_err(|err| Failure::Failed(format!("cannot listen on {}: {err}", args.bind)))?;
    let mode = if args.read_only { ", read-only" } else { "" };
    let _ = writeln!(
        std::io::stderr().lock(),
        "pgq: dashboard on http://{addr}/{mode}; Ctrl-C stops it"
    );
    let mut app = pgq_web::router(client, config);
    if args.token.is_none() {
        app = app.layer(middleware::from_fn(addressed_to_this_host));
    }
    let (stopping, mut stop) = tokio::sync::watch::channel(false);
    let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
        let _ = tokio::signal::ctrl_c().await;
        let _ = stopping.send(true);
    });
    // Requests in flight finish, within a grace: a job page following a job that runs for hours
    // keeps its stream open, and would otherwise keep the dashboard running after Ctrl-C.
    let grace = async {
        let _ = stop.wait_for(|stopped| *stopped).await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    };
    tokio::select! {
        served = serve => {
            served.map_err(|err| Failure::Failed(format!("the dashboard stopped: {err}")))?;
        }
        () = grace => {}
    }
    Ok(ExitCode::SUCCESS)
}

/// How long requests in flight at Ctrl-C may take to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Without a token the dashboard listens on a loopback address, where any page the browser
/// opens could reach it under a name of its own that resolves there (DNS rebinding): it answers
/// only requests addressed to this host by a loopback name.
async fn addressed_to_this_host(request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(HOST)
        .and_then(|host| host.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()));
    if host.is_some_and(is_loopback_name) {
        return next.run(request).await;
    }
    (
        StatusCode::MISDIRECTED_REQUEST,
        "pgq web without an access token answers only requests addressed to localhost, \
         127.0.0.1 or [::1]; pass --token (or set PGQ_WEB_TOKEN) to serve other names\n",
    )
        .into_response()
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

/// The dashboard's settings from the options; refuses to serve beyond this host without a
/// token.
fn config(args: &WebArgs) -> Result<DashboardConfig, Failure> {
    let token = args.token.as_deref();
    if token.is_some_and(str::is_empty) {
        return Err(Failure::Usage("the access token must not be empty".into()));
    }
    if token.is_none() && !args.bind.ip().is_loopback() {
        return Err(Failure::Usage(format!(
            "refusing to serve {} without an access token: pass --token (or set PGQ_WEB_TOKEN), \
             or bind a loopback address such as 127.0.0.1",
            args.bind
        )));
    }
    let payloads = if args.hide_payloads {
        PayloadView::Hidden
    } else if args.mask.is_empty() {
        PayloadView::Shown
    } else {
        PayloadView::Masked(args.mask.clone())
    };
    let mut config = DashboardConfig::new()
        .read_only(args.read_only)
        .payloads(payloads);
    if let Some(token) = token {
        config = config.access_token(token);
    }
    Ok(config)
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
