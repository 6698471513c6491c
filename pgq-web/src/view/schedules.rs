//! The periodic schedules: what each runs and when, its last and next instant, and which worker
//! leads it now.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use maud::{Markup, html};
use pgq_core::ScheduleInfo;

use crate::clock;
use crate::dashboard::Dashboard;
use crate::page::{self, Section};
use crate::percent;
use crate::problem::{Answer, Problem};

/// `GET /schedules`.
pub(crate) async fn page(State(dashboard): State<Dashboard>) -> Answer {
    let result = render(&dashboard).await;
    Answer(dashboard, result)
}

async fn render(dashboard: &Dashboard) -> Result<Response, Problem> {
    let schedules = dashboard.client.schedules().await?;
    let now = Utc::now();
    let body = html! {
        h1 { "Schedules" }
        @if schedules.is_empty() {
            div.empty {
                p { "No periodic schedule has run yet." }
                p {
                    "Declare one on a task with " code { "#[task(cron = \"0 */5 * * * *\")]" }
                    ", or on a worker with "
                    code { "WorkerBuilder::periodic(Schedule::cron(\"…\"), make)" }
                    "; it is listed here once a worker runs it."
                }
            }
        } @else {
            table.schedules {
                thead {
                    tr {
                        th { "Name" } th { "Task" } th { "Cron" } th { "Time zone" }
                        th { "Missed" } th { "Last run" } th { "Next run" } th { "Leader" }
                    }
                }
                tbody {
                    @for schedule in &schedules {
                        (row(dashboard, schedule, now))
                    }
                }
            }
            p.hint {
                "Times are UTC; each cron expression is read in its schedule's time zone. A "
                "schedule no worker declares any more stays listed, with no leader, until its row "
                "in " code { "pgq.schedules" } " is deleted."
            }
        }
    };
    Ok(page::render(
        dashboard,
        StatusCode::OK,
        Section::Schedules,
        "Schedules",
        body,
    ))
}

fn row(dashboard: &Dashboard, schedule: &ScheduleInfo, now: DateTime<Utc>) -> Markup {
    let jobs = format!("/jobs?task={}", percent::encode(&schedule.task));
    html! {
        tr data-schedule=(schedule.name) {
            td.name { strong { (schedule.name) } }
            td.task { a href=(dashboard.link(&jobs)) title="Its jobs" { (schedule.task) } }
            td.cron { code { (schedule.cron) } }
            td.zone { (schedule.time_zone) }
            td.missed {
                @match schedule.missed {
                    Some(missed) => code { (missed) },
                    // A policy written by a newer version: said, not guessed.
                    None => span.muted { "unknown" },
                }
            }
            td.last {
                @match schedule.last_run {
                    // Enqueued, so passed by the database's clock: on a host whose clock lags
                    // it, or an instant enqueued while the page was read, it says "now".
                    Some(at) => {
                        (moment(at, now.max(at)))
                        @if let Some(job) = schedule.last_job {
                            " " a href=(dashboard.link(&format!("/jobs/{job}"))) { "job " (job) }
                        }
                    }
                    None => span.muted { "not yet" },
                }
            }
            td.next {
                @match schedule.next_run {
                    // After the database's now by definition: never "ago", whatever this
                    // host's clock says; "now" when that instant came while the page was read.
                    Some(at) => (moment(at, now.min(at))),
                    None => span.muted { "no more instants" },
                }
            }
            td.leader {
                @match &schedule.leader {
                    Some(worker) => code { (worker) },
                    None => span.badge.unled { "no leader" },
                }
            }
        }
    }
}

/// An instant as its exact time, with how long ago or how soon beneath it.
fn moment(at: DateTime<Utc>, now: DateTime<Utc>) -> Markup {
    html! {
        span.nowrap { (clock::exact(at)) }
        br;
        span.muted { (clock::relative(at, now)) }
    }
}
