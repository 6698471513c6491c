//! The live workers: where each runs, what it serves, and which jobs it holds now.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use maud::html;
use pgq_core::{Job, JobFilter, JobStatus};

use crate::clock;
use crate::dashboard::Dashboard;
use crate::page::{self, Section};
use crate::problem::{Answer, Problem};

/// How many held jobs the page lists, over all workers: held jobs are bounded by the workers'
/// concurrency, so this is a display limit, not a search.
const HELD_SHOWN: usize = 500;

/// `GET /workers`.
pub(crate) async fn page(State(dashboard): State<Dashboard>) -> Answer {
    let result = render(&dashboard).await;
    Answer(dashboard, result)
}

async fn render(dashboard: &Dashboard) -> Result<Response, Problem> {
    let client = &dashboard.client;
    let held = JobFilter::new()
        .statuses([JobStatus::Claimed, JobStatus::Running])
        .limit(HELD_SHOWN);
    let (workers, held) = tokio::try_join!(client.workers(), client.jobs(&held))?;
    let mut by_worker: BTreeMap<&str, Vec<&Job>> = BTreeMap::new();
    for job in &held.jobs {
        if let Some(worker) = &job.worker_id {
            by_worker.entry(worker).or_default().push(job);
        }
    }
    let now = Utc::now();
    let body = html! {
        h1 { "Workers" }
        @if workers.is_empty() {
            p.empty { "No worker is running." }
        }
        @for worker in &workers {
            section.worker data-worker=(worker.id) {
                header {
                    h2 { code { (worker.id) } }
                    span.muted { (worker.host) " · pid " (worker.pid) }
                }
                dl.details.inline {
                    dt { "Started" } dd { (clock::relative(worker.started_at, now)) }
                    dt { "Heartbeat" } dd { (clock::relative(worker.heartbeat_at, now)) }
                    dt { "Holds" } dd { (worker.held) }
                    dt { "Queues" }
                    dd {
                        @for (queue, concurrency) in &worker.queues {
                            span.chip { (queue) " ×" (concurrency) }
                        }
                    }
                }
                @let jobs = by_worker.get(worker.id.as_str()).map(Vec::as_slice).unwrap_or(&[]);
                @if jobs.is_empty() {
                    p.muted { "Holds no job now." }
                } @else {
                    table.jobs {
                        thead {
                            tr {
                                th.num { "Id" } th { "Task" } th { "Queue" } th { "Status" }
                                th { "Progress" } th { "Since" }
                            }
                        }
                        tbody {
                            @for job in jobs {
                                tr {
                                    @let link = dashboard.link(&format!("/jobs/{}", job.id));
                                    td.num { a href=(link) { (job.id) } }
                                    td { (job.task) }
                                    td { (job.queue) }
                                    td { span class=(format!("status {}", job.status)) { (job.status) } }
                                    @let stage = job.current_stage.as_deref().unwrap_or("");
                                    td { (job.progress) "% " span.stage { (stage) } }
                                    td {
                                        @if let Some(at) = job.started_at.or(job.claimed_at) {
                                            (clock::relative(at, now))
                                        }
                                    }
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
        Section::Workers,
        "Workers",
        body,
    ))
}
