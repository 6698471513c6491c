//! `GET /jobs/{id}/live`: a job's changes as server-sent events, from the admin API's watch,
//! until it finishes.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::header::CACHE_CONTROL;
use axum::http::{HeaderValue, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt as _};
use pgq_core::Job;
use serde_json::json;
use tokio::sync::OwnedSemaphorePermit;

use crate::dashboard::Dashboard;
use crate::page;
use crate::problem::Problem;
use crate::view::job::job_id;

/// A comment every so often, so that proxies keep an idle stream open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(crate) async fn events(
    State(dashboard): State<Dashboard>,
    id: Result<Path<String>, PathRejection>,
) -> Response {
    let id = match job_id(id) {
        Ok(id) => id,
        Err(problem) => return problem.page(&dashboard),
    };
    // A browser's EventSource gives up on a 503 instead of retrying: the page stays as loaded.
    let Ok(permit) = dashboard.live_streams.clone().try_acquire_owned() else {
        // A job that does not exist is a 404 however many pages follow theirs.
        match dashboard.client.job(id).await {
            Ok(Some(_)) => {}
            Ok(None) => return Problem::from(pgq_core::Error::JobNotFound(id)).page(&dashboard),
            Err(err) => return Problem::from(err).page(&dashboard),
        }
        return page::problem(
            &dashboard,
            StatusCode::SERVICE_UNAVAILABLE,
            "too many job pages are following their jobs live",
        );
    };
    let mut watch = match dashboard.client.watch(id).await {
        Ok(watch) => watch,
        Err(err) => return Problem::from(err).page(&dashboard),
    };
    // The job as it is, read before answering: a job that does not exist is a 404, as its page.
    let now = match watch.next().await {
        Ok(now) => now,
        Err(err) => return Problem::from(err).page(&dashboard),
    };
    let first = stream::iter(now.map(|job| Ok(job_event(&job))));
    let mut response = Sse::new(first.chain(changes(watch, permit)))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    // The stream's own `no-cache` still lets a cache store what the job showed.
    response
        .headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// One `job` event a change; a `gone` event if the job was deleted or the watch failed, then
/// the end. The permit goes when the stream does.
fn changes(
    watch: pgq_core::JobWatch,
    permit: OwnedSemaphorePermit,
) -> impl Stream<Item = Result<Event, Infallible>> {
    stream::unfold(Some((watch, permit)), |state| async move {
        let (mut watch, permit) = state?;
        match watch.next().await {
            Ok(Some(job)) => Some((Ok(job_event(&job)), Some((watch, permit)))),
            Ok(None) => None,
            Err(err) => Some((
                Ok(Event::default().event("gone").data(err.to_string())),
                None,
            )),
        }
    })
}

/// What the job page's script updates: plain values it writes as text.
fn job_event(job: &Job) -> Event {
    let data = json!({
        "status": job.status,
        "progress": job.progress,
        "stage": job.current_stage,
        "attempts": job.attempts,
        "max_attempts": job.max_attempts,
        "worker": job.worker_id,
    });
    Event::default().event("job").data(data.to_string())
}
