//! One job: its status and progress (live), attempts and timing, payload, metadata and error
//! history, and the actions its status allows.

use axum::Extension;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use pgq_core::{Job, JobId, JobStatus};

use crate::clock;
use crate::config::PayloadView;
use crate::csrf::{self, CsrfToken};
use crate::dashboard::Dashboard;
use crate::page::{self, Section};
use crate::payload;
use crate::percent;
use crate::problem::{Answer, Problem, echoed};

/// `GET /jobs/{id}`. An id that is not a job id gets the dashboard's own page, not the
/// router's plain-text rejection.
pub(crate) async fn page(
    State(dashboard): State<Dashboard>,
    Extension(token): Extension<CsrfToken>,
    id: Result<Path<String>, PathRejection>,
) -> Answer {
    let result = match job_id(id) {
        Ok(id) => render(&dashboard, &token, id).await,
        Err(problem) => Err(problem),
    };
    Answer(dashboard, result)
}

/// The job id in a path, or a problem naming what was there instead (cut short): a path that
/// is not UTF-8 too, which the router would answer in plain text.
pub(crate) fn job_id(path: Result<Path<String>, PathRejection>) -> Result<JobId, Problem> {
    let Path(text) = path?;
    text.parse::<JobId>().map_err(|_| {
        Problem::BadRequest(format!(
            "{} is not a job id: a job id is a whole number from 1",
            echoed(&text)
        ))
    })
}

async fn render(dashboard: &Dashboard, token: &CsrfToken, id: JobId) -> Result<Response, Problem> {
    let Some(job) = dashboard.client.job(id).await? else {
        return Err(Problem::NotFound(format!("no job has id {id}")));
    };
    let now = Utc::now();
    let live = (!job.status.is_finished()).then(|| dashboard.link(&format!("/jobs/{id}/live")));
    let body = html! {
        article.job #job data-live=[live] data-status=(job.status) {
            header.job-head {
                h1 { "Job " (job.id) " " span.task { (job.task) } }
                span #job-status class=(format!("status big {}", job.status)) { (job.status) }
            }
            @if !dashboard.config.read_only {
                (actions(dashboard, token, &job))
            }
            section.progress {
                progress #job-progress max="100" value=(job.progress) {}
                span #job-progress-text { (job.progress) "%" }
                span #job-stage.stage { (job.current_stage.as_deref().unwrap_or("")) }
            }
            div.columns {
                section {
                    h2 { "Details" }
                    (details(dashboard, &job, now))
                }
                section {
                    h2 { "Payload" }
                    @match payload::shown(&job.payload, &dashboard.config.payloads) {
                        Some(text) => pre.payload #payload { (text) },
                        None => p.muted #payload { "Payloads are hidden by this dashboard's configuration." },
                    }
                    @if let Some(meta) = &job.meta {
                        h2 { "Metadata" }
                        pre.payload { (serde_json::to_string_pretty(meta).unwrap_or_default()) }
                    }
                }
            }
            section.errors {
                h2 { "Errors" }
                @if job.errors.is_empty() && job.last_error.is_none() {
                    p.muted { "No attempt has failed." }
                } @else {
                    table.errors {
                        thead { tr { th.num { "Attempt" } th { "When" } th { "Error" } } }
                        tbody {
                            @for error in job.errors.iter().rev() {
                                tr {
                                    td.num { (error.attempt) }
                                    td.nowrap { (clock::relative(error.at, now)) }
                                    td { pre.error { (error.error) } }
                                }
                            }
                            @if job.errors.is_empty() {
                                @if let Some(error) = &job.last_error {
                                    tr { td.num { "—" } td {} td { pre.error { (error) } } }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(page::render(
        dashboard,
        StatusCode::OK,
        Section::Jobs,
        &format!("Job {id}"),
        body,
    ))
}

/// Where the job is and has been: queue, attempts, every time it has, its worker and lease.
fn details(dashboard: &Dashboard, job: &Job, now: DateTime<Utc>) -> Markup {
    let queue = dashboard.link(&format!("/jobs?queue={}", percent::encode(&job.queue)));
    let took = match (job.started_at, job.completed_at) {
        (Some(started), Some(done)) => (done - started).to_std().ok(),
        _ => None,
    };
    let times = [
        ("Enqueued", Some(job.created_at)),
        ("Due", Some(job.run_at)),
        ("Claimed", job.claimed_at),
        ("Started", job.started_at),
        ("Finished", job.completed_at),
        ("Lease until", job.lease_expires_at),
        ("Cancel asked", job.cancel_requested_at),
    ];
    html! {
        dl.details {
            dt { "Queue" } dd { a href=(queue) { (job.queue) } }
            dt { "Priority" } dd { (job.priority) }
            dt { "Attempts" } dd #job-attempts { (job.attempts) " of " (job.max_attempts) }
            // A unique key is made from payload fields: it is shown only with the payload.
            @if let Some(key) = &job.unique_key {
                dt { "Unique key" }
                @if dashboard.config.payloads == PayloadView::Shown {
                    dd { code { (key) } }
                } @else {
                    dd { "hidden with the payload" }
                }
            }
            @for (label, at) in times {
                @if let Some(at) = at {
                    dt { (label) } dd { (clock::relative(at, now)) }
                }
            }
            @if let Some(took) = took {
                dt { "Last attempt took" } dd { (clock::duration(took)) }
            }
            @if let Some(worker) = &job.worker_id {
                dt { "Worker" } dd #job-worker { code { (worker) } }
            }
            dt { "Events" } dd { (job.events_count) }
            dt { "Updated" } dd #job-updated { (clock::relative(job.updated_at, now)) }
        }
    }
}

/// The buttons for what the job's status allows.
fn actions(dashboard: &Dashboard, token: &CsrfToken, job: &Job) -> Markup {
    let mut allowed = Vec::new();
    match job.status {
        JobStatus::Failed | JobStatus::Cancelled => allowed.push(("retry", "Retry")),
        JobStatus::Pending => allowed.extend([("run_now", "Run now"), ("cancel", "Cancel")]),
        JobStatus::Claimed | JobStatus::Running => allowed.push(("cancel", "Cancel")),
        JobStatus::Completed => {}
    }
    if job.status.is_finished() {
        allowed.push(("delete", "Delete"));
    }
    let here = format!("/jobs/{}", job.id);
    html! {
        form.job-actions method="post" action=(dashboard.link("/jobs/action")) {
            input type="hidden" name=(csrf::FIELD) value=(token.0);
            input type="hidden" name="id" value=(job.id);
            input type="hidden" name="return_to" value=(here);
            @for (action, label) in allowed {
                @let class = (action == "delete").then_some("danger");
                button type="submit" name="action" value=(action) class=[class] { (label) }
            }
        }
    }
}
