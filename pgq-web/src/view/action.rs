//! The actions: retry, cancel, delete and run now on ticked jobs; pause and resume a queue.
//! Each is a POST with the CSRF token, refused on a read-only dashboard, and answered with a
//! page that says what it did and what it left alone.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maud::{Markup, html};
use pgq_core::{ActionReport, JobId};

use crate::csrf;
use crate::dashboard::Dashboard;
use crate::form::{self, Fields};
use crate::page::{self, Section};
use crate::problem::{Answer, Problem, echoed};

/// A retried job gets at least this many attempts left.
const RETRY_ATTEMPTS: u32 = 1;

fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// Refuses every action of a read-only dashboard, whatever the request holds.
fn writable(dashboard: &Dashboard) -> Result<(), Problem> {
    if dashboard.config.read_only {
        return Err(Problem::Forbidden(
            "refused: this dashboard is read-only".to_owned(),
        ));
    }
    Ok(())
}

/// The form of an action's request, read only once the dashboard is known to be writable: a
/// read-only one refuses without reading the body.
async fn form(dashboard: &Dashboard, request: Request) -> Result<(HeaderMap, Fields), Problem> {
    writable(dashboard)?;
    let headers = request.headers().clone();
    Ok((headers, form::fields(request, dashboard).await?))
}

/// `POST /jobs/action`: `action` on every `id` ticked.
pub(crate) async fn jobs(State(dashboard): State<Dashboard>, request: Request) -> Answer {
    let result = match form(&dashboard, request).await {
        Ok((headers, fields)) => act_on_jobs(&dashboard, &headers, &fields).await,
        Err(problem) => Err(problem),
    };
    Answer(dashboard, result)
}

async fn act_on_jobs(
    dashboard: &Dashboard,
    headers: &HeaderMap,
    fields: &Fields,
) -> Result<Response, Problem> {
    csrf::check(dashboard, headers, fields)?;
    let ids = fields
        .iter()
        .filter(|(name, _)| name == "id")
        .map(|(_, value)| {
            value
                .parse::<JobId>()
                .map_err(|_| Problem::BadRequest(format!("invalid job id {}", echoed(value))))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if ids.is_empty() {
        return Err(Problem::BadRequest(
            "no job was ticked: tick the jobs to act on".to_owned(),
        ));
    }
    let client = &dashboard.client;
    let action = field(fields, "action").unwrap_or("");
    let (report, verb) = match action {
        "retry" => (client.retry_jobs(ids, RETRY_ATTEMPTS).await?, "Retried"),
        "cancel" => (client.cancel_jobs(ids).await?, "Cancelled"),
        "delete" => (client.delete_jobs(ids, false).await?, "Deleted"),
        "run_now" => (client.run_jobs_now(ids).await?, "Made due now"),
        other => {
            return Err(Problem::BadRequest(format!(
                "unknown action {}",
                echoed(other)
            )));
        }
    };
    let back = field(fields, "return_to")
        .filter(|path| is_own_path(path))
        .unwrap_or("/jobs");
    let body = html! {
        h1 { "Done" }
        (report_notice(dashboard, verb, &report))
        p.links {
            a.button href=(dashboard.link(back)) #back { "Back" }
            " "
            a href=(dashboard.link("/jobs")) { "All jobs" }
        }
    };
    Ok(page::render(
        dashboard,
        StatusCode::OK,
        Section::Jobs,
        verb,
        body,
    ))
}

/// What the report says, job by job.
fn report_notice(dashboard: &Dashboard, verb: &str, report: &ActionReport) -> Markup {
    let job_links = |ids: &[JobId]| {
        html! {
            @for (i, id) in ids.iter().enumerate() {
                @if i > 0 { ", " }
                a href=(dashboard.link(&format!("/jobs/{id}"))) { (id) }
            }
        }
    };
    let jobs = |n: usize| if n == 1 { "job" } else { "jobs" };
    html! {
        div.notice.good #report {
            p {
                (verb) " " (report.changed.len()) " " (jobs(report.changed.len()))
                @if !report.changed.is_empty() { ": " (job_links(&report.changed)) }
                "."
            }
            @if !report.requested.is_empty() {
                p {
                    "Asked " (report.requested.len()) " running " (jobs(report.requested.len()))
                    " to stop: " (job_links(&report.requested)) "."
                }
            }
        }
        @if !report.skipped.is_empty() {
            div.notice.warn {
                p { "Left alone:" }
                ul {
                    @for (id, reason) in &report.skipped {
                        li { "job " a href=(dashboard.link(&format!("/jobs/{id}"))) { (id) } ": " (reason) }
                    }
                }
            }
        }
    }
}

/// Whether `path` is one of the dashboard's own pages: a relative path, never another host.
fn is_own_path(path: &str) -> bool {
    path.starts_with('/')
        && !path.starts_with("//")
        && path
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'\\' && b != b'"')
}

/// `POST /queues/{pause|resume}`: the `queue` field's queue.
pub(crate) async fn queue(
    State(dashboard): State<Dashboard>,
    action: Result<Path<String>, PathRejection>,
    request: Request,
) -> Answer {
    let result = match (writable(&dashboard), action) {
        (Err(refused), _) => Err(refused),
        (Ok(()), Err(rejection)) => Err(rejection.into()),
        (Ok(()), Ok(Path(action))) => match form(&dashboard, request).await {
            Ok((headers, fields)) => act_on_queue(&dashboard, &action, &headers, &fields).await,
            Err(problem) => Err(problem),
        },
    };
    Answer(dashboard, result)
}

async fn act_on_queue(
    dashboard: &Dashboard,
    action: &str,
    headers: &HeaderMap,
    fields: &Fields,
) -> Result<Response, Problem> {
    csrf::check(dashboard, headers, fields)?;
    let queue = field(fields, "queue").unwrap_or("");
    let done = match action {
        "pause" => {
            dashboard.client.pause_queue(queue).await?;
            "Paused"
        }
        "resume" => {
            dashboard.client.resume_queue(queue).await?;
            "Resumed"
        }
        other => {
            return Err(Problem::NotFound(format!(
                "no queue action {}",
                echoed(other)
            )));
        }
    };
    let effect = if action == "pause" {
        "Workers stop claiming from it within a second; running jobs finish; enqueues still land."
    } else {
        "Workers claim from it again within a second."
    };
    let body = html! {
        h1 { "Done" }
        div.notice.good #report {
            p { (done) " queue " strong { (queue) } "." }
            p { (effect) }
        }
        p.links { a.button href=(dashboard.link("/")) #back { "Back to the queues" } }
    };
    Ok(page::render(
        dashboard,
        StatusCode::OK,
        Section::Queues,
        done,
        body,
    ))
}

#[cfg(test)]
mod tests {
    use super::is_own_path;

    #[test]
    fn only_own_paths_are_returned_to() {
        assert!(is_own_path("/jobs?status=failed&queue=a"));
        assert!(is_own_path("/jobs/12"));
        for path in [
            "//evil.example/x",
            "https://evil.example",
            "/\\evil",
            "jobs",
            "/a b",
        ] {
            assert!(!is_own_path(path), "{path}");
        }
    }
}
