//! The job list: the admin API's filters in a form, a page of jobs at a time, and bulk actions
//! on the jobs ticked.

use axum::Extension;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use chrono::Utc;
use maud::{Markup, html};
use pgq_core::{Job, JobCursor, JobFilter, JobOrder, JobStatus};

use crate::clock;
use crate::csrf::{self, CsrfToken};
use crate::dashboard::Dashboard;
use crate::page::{self, Section};
use crate::percent;
use crate::problem::{self, Answer, Problem, echoed};

/// Jobs a page unless the query asks for another number.
const DEFAULT_LIMIT: usize = 50;
/// The statuses the filter offers, in the order of a job's life.
const STATUSES: [JobStatus; 6] = [
    JobStatus::Pending,
    JobStatus::Claimed,
    JobStatus::Running,
    JobStatus::Completed,
    JobStatus::Failed,
    JobStatus::Cancelled,
];
/// The orders the list offers: the query's value and its label.
const ORDERS: [(&str, &str); 3] = [
    ("newest", "Newest first"),
    ("oldest", "Oldest first"),
    ("run_at", "Next to run"),
];
/// How much of a last error the list shows; the job page shows all of it.
const ERROR_PREVIEW_CHARS: usize = 120;

/// The list's query string, parsed: what the filter form shows and the search uses.
#[derive(Debug, Default)]
struct ListQuery {
    statuses: Vec<JobStatus>,
    queue: String,
    task: String,
    error: String,
    order: String,
    after: Option<JobCursor>,
    limit: usize,
}

impl ListQuery {
    fn parse(pairs: &[(String, String)]) -> Result<Self, String> {
        let mut query = ListQuery {
            limit: DEFAULT_LIMIT,
            ..ListQuery::default()
        };
        for (name, value) in pairs {
            match name.as_str() {
                _ if value.is_empty() => {}
                "status" => query.statuses.push(value.parse()?),
                "queue" => query.queue = value.clone(),
                "task" => query.task = value.clone(),
                "error" => query.error = value.clone(),
                "order" => query.order = value.clone(),
                "after" => query.after = Some(value.parse()?),
                "limit" => {
                    query.limit = value.parse().map_err(|_| {
                        format!("invalid limit {}: expected a number", echoed(value))
                    })?
                }
                _ => {}
            }
        }
        Ok(query)
    }

    fn filter(&self) -> Result<JobFilter, String> {
        let mut filter = JobFilter::new()
            .statuses(self.statuses.iter().copied())
            .limit(self.limit);
        if !self.queue.is_empty() {
            filter = filter.queue(&self.queue);
        }
        if !self.task.is_empty() {
            filter = filter.task(&self.task);
        }
        if !self.error.is_empty() {
            filter = filter.error_contains(&self.error);
        }
        filter = filter.order(match self.order.as_str() {
            "" | "newest" => JobOrder::Newest,
            "oldest" => JobOrder::Oldest,
            "run_at" => JobOrder::RunAt,
            other => return Err(format!("unknown order {}", echoed(other))),
        });
        if let Some(after) = self.after {
            filter = filter.after(after);
        }
        Ok(filter)
    }

    /// These filters as a page that refused them shows them again: each text cut to what a
    /// page echoes.
    fn echoed(mut self) -> Self {
        for text in [
            &mut self.queue,
            &mut self.task,
            &mut self.error,
            &mut self.order,
        ] {
            let kept = problem::cut(text).len();
            text.truncate(kept);
        }
        self
    }

    /// The query string for these filters, starting after `after`.
    fn link(&self, after: Option<JobCursor>) -> String {
        let mut parts = Vec::new();
        for status in &self.statuses {
            parts.push(format!("status={status}"));
        }
        for (name, value) in [
            ("queue", &self.queue),
            ("task", &self.task),
            ("error", &self.error),
            ("order", &self.order),
        ] {
            if !value.is_empty() {
                parts.push(format!("{name}={}", percent::encode(value)));
            }
        }
        if self.limit != DEFAULT_LIMIT {
            parts.push(format!("limit={}", self.limit));
        }
        if let Some(after) = after {
            parts.push(format!("after={}", percent::encode(&after.to_string())));
        }
        if parts.is_empty() {
            "/jobs".to_owned()
        } else {
            format!("/jobs?{}", parts.join("&"))
        }
    }
}

/// `GET /jobs`.
pub(crate) async fn page(
    State(dashboard): State<Dashboard>,
    Extension(token): Extension<CsrfToken>,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Answer {
    let result = match query {
        Ok(Query(pairs)) => render(&dashboard, &token, &pairs).await,
        Err(rejection) => Err(rejection.into()),
    };
    Answer(dashboard, result)
}

async fn render(
    dashboard: &Dashboard,
    token: &CsrfToken,
    pairs: &[(String, String)],
) -> Result<Response, Problem> {
    let (query, parsed) = match ListQuery::parse(pairs) {
        Ok(query) => match query.filter() {
            Ok(filter) => (query, Ok(filter)),
            Err(err) => (query, Err(err)),
        },
        Err(err) => (ListQuery::default(), Err(err)),
    };
    let found = match parsed {
        Ok(filter) => {
            let client = &dashboard.client;
            match tokio::try_join!(client.jobs(&filter), client.count_jobs(&filter)) {
                Ok(found) => Ok(found),
                Err(pgq_core::Error::InvalidFilter(err)) => Err(err),
                Err(err) => return Err(err.into()),
            }
        }
        Err(err) => Err(err),
    };
    let query = if found.is_ok() { query } else { query.echoed() };
    let here = query.link(query.after);
    let body = html! {
        h1 { "Jobs" }
        (filter_form(dashboard, &query))
        @match &found {
            Err(err) => p.notice.bad { (err) },
            Ok((page, count)) => {
                p.count {
                    (count.count) @if !count.exact { "+" }
                    @if count.count == 1 { " job matches" } @else { " jobs match" }
                    @if query.after.is_some() { " from here" }
                }
                (list(dashboard, token, &page.jobs, &here))
                nav.pager {
                    @if query.after.is_some() {
                        a href=(dashboard.link(&query.link(None))) { "« First page" }
                    }
                    @if let Some(next) = page.next {
                        a.next href=(dashboard.link(&query.link(Some(next)))) { "Next page »" }
                    }
                }
            }
        }
    };
    let status = if found.is_ok() {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    };
    Ok(page::render(dashboard, status, Section::Jobs, "Jobs", body))
}

fn filter_form(dashboard: &Dashboard, query: &ListQuery) -> Markup {
    html! {
        form.filters method="get" action=(dashboard.link("/jobs")) {
            fieldset.statuses {
                legend { "Status" }
                @for status in STATUSES {
                    label.check {
                        input type="checkbox" name="status" value=(status)
                            checked[query.statuses.contains(&status)];
                        span class=(format!("status {status}")) { (status) }
                    }
                }
            }
            label { "Queue" input type="text" name="queue" value=(query.queue) placeholder="any"; }
            label { "Task" input type="text" name="task" value=(query.task) placeholder="any"; }
            label { "Error contains" input type="text" name="error" value=(query.error) placeholder="text"; }
            label {
                "Order"
                select name="order" {
                    @for (value, label) in ORDERS {
                        option value=(value) selected[query.order == value] { (label) }
                    }
                }
            }
            div.buttons {
                button type="submit" { "Filter" }
                a.button.plain href=(dashboard.link("/jobs")) { "Clear" }
            }
        }
    }
}

fn list(dashboard: &Dashboard, token: &CsrfToken, jobs: &[Job], here: &str) -> Markup {
    let now = Utc::now();
    let actions = !dashboard.config.read_only;
    html! {
        @if jobs.is_empty() {
            p.empty { "No jobs on this page." }
        } @else {
            form #bulk method="post" action=(dashboard.link("/jobs/action")) {
                input type="hidden" name=(csrf::FIELD) value=(token.0);
                input type="hidden" name="return_to" value=(here);
                @if actions {
                    div.bulk-bar {
                        span #selected-count { "Tick jobs to act on them:" }
                        button.small type="submit" name="action" value="retry" { "Retry" }
                        button.small type="submit" name="action" value="run_now" { "Run now" }
                        button.small type="submit" name="action" value="cancel" { "Cancel" }
                        button.small.danger type="submit" name="action" value="delete" { "Delete" }
                    }
                }
                table.jobs {
                    thead {
                        tr {
                            @if actions {
                                th.pick {
                                    input #select-all type="checkbox" title="Select every job on this page";
                                }
                            }
                            th.num { "Id" }
                            th { "Task" }
                            th { "Queue" }
                            th { "Status" }
                            th.num { "Attempts" }
                            th.num { "Priority" }
                            th { "When" }
                            th { "Last error" }
                        }
                    }
                    tbody {
                        @for job in jobs {
                            tr data-job=(job.id) {
                                @if actions {
                                    td.pick {
                                        input.pick type="checkbox" name="id" value=(job.id)
                                            aria-label=(format!("select job {}", job.id));
                                    }
                                }
                                td.num { a href=(dashboard.link(&format!("/jobs/{}", job.id))) { (job.id) } }
                                td { (job.task) }
                                td { (job.queue) }
                                td { span class=(format!("status {}", job.status)) { (job.status) } }
                                td.num { (job.attempts) "/" (job.max_attempts) }
                                td.num { (job.priority) }
                                td { (when(job, now)) }
                                td.error {
                                    @if let Some(error) = &job.last_error {
                                        (preview(error))
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The time that matters for the job's status: finished, started, or due.
fn when(job: &Job, now: chrono::DateTime<Utc>) -> Markup {
    match (job.status, job.completed_at, job.started_at) {
        (status, Some(at), _) if status.is_finished() => {
            html! { (status) " " (clock::relative(at, now)) }
        }
        (JobStatus::Running, _, Some(at)) => html! { "started " (clock::relative(at, now)) },
        _ => html! { "due " (clock::relative(job.run_at, now)) },
    }
}

fn preview(error: &str) -> String {
    let mut chars = error.chars();
    let head: String = chars.by_ref().take(ERROR_PREVIEW_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

#[cfg(test)]
mod tests {
    use super::ListQuery;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn a_query_round_trips_through_its_link() {
        let query = ListQuery::parse(&pairs(&[
            ("status", "failed"),
            ("status", "cancelled"),
            ("queue", "mail:eu"),
            ("error", "a b&c"),
            ("task", ""),
        ]))
        .unwrap();
        assert_eq!(
            query.link(None),
            "/jobs?status=failed&status=cancelled&queue=mail%3Aeu&error=a%20b%26c"
        );
        assert!(query.filter().is_ok());
    }

    #[test]
    fn bad_values_are_reported() {
        assert!(ListQuery::parse(&pairs(&[("status", "done")])).is_err());
        assert!(ListQuery::parse(&pairs(&[("after", "x")])).is_err());
        assert!(ListQuery::parse(&pairs(&[("limit", "many")])).is_err());
        let query = ListQuery::parse(&pairs(&[("order", "random")])).unwrap();
        assert!(query.filter().is_err());
    }
}
