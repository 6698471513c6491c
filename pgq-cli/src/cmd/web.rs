//! `pgq web`: the dashboard, served on its own until interrupted.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

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
    let app = pgq_web::router(client, config);
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
    // Without a token the dashboard is on a loopback address, where a web page whose name is
    // made to resolve there (DNS rebinding) could reach it: it answers loopback names only.
    let mut config = DashboardConfig::new()
        .read_only(args.read_only)
        .payloads(payloads)
        .loopback_only(token.is_none());
    if let Some(token) = token {
        config = config.access_token(token);
    }
    Ok(config)
}
