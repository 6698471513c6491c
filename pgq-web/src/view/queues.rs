//! The overview: every queue's depth by status, lag, rates, last hour, pause flag and workers.

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{Markup, html};
use pgq_core::{FinishedHistory, QueueInfo};

use crate::chart;
use crate::clock;
use crate::csrf::{self, CsrfToken};
use crate::dashboard::Dashboard;
use crate::page::{self, Section};
use crate::percent;
use crate::problem::{Answer, Problem};

/// `GET /`.
pub(crate) async fn page(
    State(dashboard): State<Dashboard>,
    Extension(token): Extension<CsrfToken>,
) -> Answer {
    let result = render(&dashboard, &token).await;
    Answer(dashboard, result)
}

async fn render(dashboard: &Dashboard, token: &CsrfToken) -> Result<Response, Problem> {
    let client = &dashboard.client;
    let (queues, history) = tokio::try_join!(client.queues(), client.finished_history())?;
    let all = chart::buckets(history.now, &history.minutes);
    let (completed, failed) = all.iter().fold((0, 0), |(c, f), (bc, bf)| (c + bc, f + bf));
    let due: u64 = queues.iter().map(|q| q.stats.due).sum();
    let running: u64 = queues
        .iter()
        .map(|q| q.stats.running + q.stats.claimed)
        .sum();
    let paused = queues.iter().filter(|q| q.paused_at.is_some()).count();
    let body = html! {
        h1 { "Queues" }
        section.summary {
            div.card { span.label { "Due now" } span.value #total-due { (due) } }
            div.card { span.label { "Running" } span.value { (running) } }
            div.card { span.label { "Completed, last hour" } span.value.good { (completed) } }
            div.card { span.label { "Failed, last hour" } span.value.bad { (failed) } }
            div.card { span.label { "Paused queues" } span.value { (paused) } }
            div.card.wide {
                span.label { "All queues, last hour" }
                (chart::bars(history.now, &all))
            }
        }
        @if queues.is_empty() {
            p.empty { "No queue has active jobs, recent jobs, workers or a pause." }
        } @else {
            table.queues {
                thead {
                    tr {
                        th { "Queue" }
                        th.num { "Due" }
                        th.num { "Scheduled" }
                        th.num { "Running" }
                        th.num { "Oldest due" }
                        th.num { "Done/min" }
                        th.num { "Failed/min" }
                        th { "Last hour" }
                        th.num { "Workers" }
                        @if !dashboard.config.read_only { th {} }
                    }
                }
                tbody {
                    @for queue in &queues {
                        (row(dashboard, token, queue, &history))
                    }
                }
            }
        }
        p.hint {
            "Rates are over the last five minutes; the chart shows completed (green) and failed "
            "(red) jobs a minute."
        }
    };
    Ok(page::render(
        dashboard,
        StatusCode::OK,
        Section::Queues,
        "Queues",
        body,
    ))
}

fn row(
    dashboard: &Dashboard,
    token: &CsrfToken,
    queue: &QueueInfo,
    history: &FinishedHistory,
) -> Markup {
    let stats = &queue.stats;
    let buckets = chart::buckets(
        history.now,
        history.minutes.iter().filter(|m| m.queue == queue.name),
    );
    let jobs = format!("/jobs?queue={}", percent::encode(&queue.name));
    html! {
        tr data-queue=(queue.name) {
            td {
                a.queue-name href=(dashboard.link(&jobs)) { (queue.name) }
                @if let Some(at) = queue.paused_at {
                    " " span.badge.paused title=(format!("paused {}", clock::exact(at))) { "paused" }
                }
            }
            td.num { (stats.due) }
            td.num { (stats.scheduled) }
            td.num { (stats.running + stats.claimed) }
            td.num {
                @match stats.oldest_due_age {
                    Some(age) => (clock::duration(age)),
                    None => span.muted { "—" },
                }
            }
            td.num { (format!("{:.1}", stats.completed_per_minute)) }
            td.num { (format!("{:.1}", stats.failed_per_minute)) }
            td { (chart::bars(history.now, &buckets)) }
            td.num { (queue.workers) }
            @if !dashboard.config.read_only {
                td.actions {
                    @let (action, label) = match queue.paused_at {
                        Some(_) => ("resume", "Resume"),
                        None => ("pause", "Pause"),
                    };
                    form method="post" action=(dashboard.link(&format!("/queues/{action}"))) {
                        input type="hidden" name=(csrf::FIELD) value=(token.0);
                        input type="hidden" name="queue" value=(queue.name);
                        button.small type="submit" name="do" value=(action) { (label) }
                    }
                }
            }
        }
    }
}
