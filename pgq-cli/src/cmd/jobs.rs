//! `pgq jobs`: `list` here; `show` and the actions in modules of their own.

use std::process::ExitCode;

use pgq_core::{Job, JobCursor};
use serde_json::json;

use crate::args::{Global, JobsCommand, ListArgs};
use crate::cmd::{action, show};
use crate::connect;
use crate::failure::{Failure, Outcome};
use crate::output;

pub(crate) async fn run(global: &Global, command: &JobsCommand) -> Outcome {
    match command {
        JobsCommand::List(args) => list(global, args).await,
        JobsCommand::Show { id } => show::run(global, *id).await,
        JobsCommand::Retry(args) => action::retry(global, args).await,
        JobsCommand::Cancel(args) => action::cancel(global, args).await,
        JobsCommand::Delete(args) => action::delete(global, args).await,
        JobsCommand::RunNow { id } => action::run_now(global, *id).await,
    }
}

/// Up to `--limit` jobs, following pages (a search through the history may return short ones),
/// and the cursor to go on from.
async fn list(global: &Global, args: &ListArgs) -> Outcome {
    if args.limit == 0 {
        return Err(Failure::Usage("--limit must be at least 1".into()));
    }
    let mut asked = args.limit.min(pgq_core::limits::MAX_PAGE_SIZE);
    let mut filter = args.filter.filter()?.order(args.order).limit(asked);
    if let Some(after) = args.after {
        filter = filter.after(after);
    }
    filter.validate()?;
    let client = connect::client(global).await?;
    let mut jobs: Vec<Job> = Vec::new();
    let mut next: Option<JobCursor>;
    loop {
        let page = client.jobs(&filter).await?;
        // A page short of its limit read its whole window of ids: the next would read another,
        // and a search matching little would walk the whole history. The cursor says where to
        // go on from.
        let full = page.jobs.len() >= asked;
        jobs.extend(page.jobs);
        next = page.next;
        match next {
            Some(cursor) if full && jobs.len() < args.limit => {
                asked = (args.limit - jobs.len()).min(pgq_core::limits::MAX_PAGE_SIZE);
                filter = filter.after(cursor).limit(asked);
            }
            _ => break,
        }
    }
    if global.json {
        output::json(&json!({ "jobs": jobs, "next": next.map(|c| c.to_string()) }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .map(|job| {
            vec![
                job.id.to_string(),
                job.task.clone(),
                job.queue.clone(),
                job.status.to_string(),
                format!("{}/{}", job.attempts, job.max_attempts),
                output::time(job.run_at),
                output::short(job.last_error.as_deref().unwrap_or(""), 60),
            ]
        })
        .collect();
    output::table(
        &[
            "id",
            "task",
            "queue",
            "status",
            "attempts",
            "run at",
            "last error",
        ],
        &rows,
    )?;
    if let Some(next) = next {
        output::line(&format!("more: --after {next}"))?;
    }
    Ok(ExitCode::SUCCESS)
}
