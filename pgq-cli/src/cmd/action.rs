//! `pgq jobs retry|cancel|delete|run-now`: the jobs are named by id or by filters (never
//! neither: no action runs on every job by accident). More than a few jobs are shown and asked
//! about first, on a terminal, unless `--yes`; `--dry-run` shows and changes nothing.

use std::io::{IsTerminal as _, Write as _};
use std::process::ExitCode;

use pgq_core::{ActionReport, Client, JobFilter, JobId, JobSelection, JobStatus, SkipReason};
use serde_json::json;

use crate::args::{ActionArgs, DeleteArgs, Global, RetryArgs};
use crate::confirm::{self, ASK_ABOVE};
use crate::connect;
use crate::failure::{Failure, Outcome};
use crate::output;

/// An action, as the CLI names and runs it.
#[derive(Debug, Clone, Copy)]
enum Verb {
    Retry { attempts: u32 },
    Cancel,
    Delete { force: bool },
    RunNow,
}

impl Verb {
    fn name(self) -> &'static str {
        match self {
            Verb::Retry { .. } => "retry",
            Verb::Cancel => "cancel",
            Verb::Delete { .. } => "delete",
            Verb::RunNow => "run now",
        }
    }

    /// The command's own name, as JSON reports give it.
    fn command(self) -> &'static str {
        match self {
            Verb::RunNow => "run-now",
            verb => verb.name(),
        }
    }

    fn done(self) -> &'static str {
        match self {
            Verb::Retry { .. } => "retried",
            Verb::Cancel => "cancelled",
            Verb::Delete { .. } => "deleted",
            Verb::RunNow => "made due now",
        }
    }

    /// The statuses the action can change: a filter's other matches are not its business.
    fn statuses(self) -> &'static [JobStatus] {
        use JobStatus::*;
        match self {
            Verb::Retry { .. } => &[Failed, Cancelled],
            Verb::Cancel => &[Pending, Claimed, Running],
            Verb::Delete { force: false } => &[Completed, Failed, Cancelled],
            Verb::Delete { force: true } => {
                &[Pending, Claimed, Running, Completed, Failed, Cancelled]
            }
            Verb::RunNow => &[Pending],
        }
    }

    async fn apply(self, client: &Client, jobs: JobSelection) -> pgq_core::Result<ActionReport> {
        match self {
            Verb::Retry { attempts } => client.retry_jobs(jobs, attempts).await,
            Verb::Cancel => client.cancel_jobs(jobs).await,
            Verb::Delete { force } => client.delete_jobs(jobs, force).await,
            Verb::RunNow => client.run_jobs_now(jobs).await,
        }
    }
}

pub(crate) async fn retry(global: &Global, args: &RetryArgs) -> Outcome {
    act(
        global,
        &args.action,
        Verb::Retry {
            attempts: args.attempts,
        },
    )
    .await
}

pub(crate) async fn cancel(global: &Global, args: &ActionArgs) -> Outcome {
    act(global, args, Verb::Cancel).await
}

pub(crate) async fn delete(global: &Global, args: &DeleteArgs) -> Outcome {
    act(global, &args.action, Verb::Delete { force: args.force }).await
}

pub(crate) async fn run_now(global: &Global, id: JobId) -> Outcome {
    let client = connect::client(global).await?;
    let report = Verb::RunNow.apply(&client, vec![id].into()).await?;
    print_report(global, Verb::RunNow, &report)?;
    Ok(exit(&report, true))
}

/// The jobs named: ids as given, or a filter's matches among the statuses the action can
/// change.
enum Targets {
    Ids(Vec<JobId>),
    Filter(Box<JobFilter>),
}

async fn act(global: &Global, args: &ActionArgs, verb: Verb) -> Outcome {
    let targets = match (args.ids.is_empty(), args.filter.is_empty()) {
        (false, false) => {
            return Err(Failure::Usage(format!(
                "name the jobs to {} by id or by filters, not both",
                verb.name()
            )));
        }
        (true, true) => {
            return Err(Failure::Usage(format!(
                "name the jobs to {}: ids, or filters such as --status failed --queue email",
                verb.name()
            )));
        }
        (false, true) => Targets::Ids(args.ids.clone()),
        (true, false) => {
            // Checked as given, then narrowed to what the action can change.
            args.filter.filter()?;
            let mut narrowed = args.filter.clone();
            narrowed.status = verb
                .statuses()
                .iter()
                .copied()
                .filter(|s| args.filter.status.is_empty() || args.filter.status.contains(s))
                .collect();
            // Nothing could match: say so rather than report an action on no jobs.
            let can = || {
                let can: Vec<&str> = verb.statuses().iter().map(|s| s.as_str()).collect();
                can.join(", ")
            };
            if narrowed.status.is_empty() {
                return Err(Failure::Usage(format!(
                    "{} changes only {} jobs: --status names none of them",
                    verb.name(),
                    can()
                )));
            }
            if args.filter.names_a_finish() && !narrowed.status.iter().any(|s| s.is_finished()) {
                return Err(Failure::Usage(format!(
                    "{} changes only {} jobs, which have not finished: --finished-after and \
                     --finished-before match none of them",
                    verb.name(),
                    can()
                )));
            }
            Targets::Filter(Box::new(narrowed.filter()?))
        }
    };
    if let Targets::Ids(ids) = &targets
        && !args.dry_run
    {
        let mut named = ids.clone();
        named.sort();
        named.dedup();
        let what = format!("{} {} jobs", verb.name(), named.len());
        confirm::can_ask(&what, named.len(), args.yes)?;
    }
    let client = connect::client(global).await?;
    // Each job named with its status now, where the listing read it (`None`: not read yet).
    let (filter, found) = match targets {
        Targets::Ids(mut ids) => {
            ids.sort();
            ids.dedup();
            (None, ids.into_iter().map(|id| (id, None)).collect())
        }
        Targets::Filter(filter) => {
            let mut found = matches(&client, (*filter).clone()).await?;
            found.sort_by_key(|(id, _)| *id);
            (Some(*filter), found)
        }
    };
    let ids: Vec<JobId> = found.iter().map(|(id, _)| *id).collect();
    let by_id = filter.is_none() && !ids.is_empty();
    if args.dry_run {
        let found = if by_id {
            statuses(&client, &ids).await?
        } else {
            found
        };
        return dry_run(global, verb, &found);
    }
    let what = format!("{} {} jobs", verb.name(), ids.len());
    // Without a terminal to ask on, refused before the preview.
    confirm::can_ask(&what, ids.len(), args.yes)?;
    if ids.len() > ASK_ABOVE && !args.yes {
        preview(&client, verb, &ids).await?;
    }
    if !confirm::go_ahead(&what, ids.len(), args.yes)? {
        return Err(Failure::Failed("nothing changed".into()));
    }
    let mut report = apply_showing_progress(&client, verb, &ids, filter.as_ref()).await?;
    if filter.is_some() {
        report
            .skipped
            .extend(left_since_listed(&client, &ids, &report).await?);
    }
    print_report(global, verb, &report)?;
    Ok(exit(&report, by_id))
}

/// Jobs an action changes between two progress lines on a terminal.
const PROGRESS_EVERY: usize = 1_000;

/// The jobs of `ids` (sorted), a selection at a time with how many jobs it names: batches of ids,
/// or, for jobs a filter found, the filter over each run of consecutive listed ids, so that a job
/// that left the filter's statuses since it was listed (claimed by a worker while the question
/// was read) is skipped, not overwritten, and no job outside the list is touched.
fn selections(ids: &[JobId], filter: Option<&JobFilter>) -> Vec<(usize, JobSelection)> {
    let Some(filter) = filter else {
        return ids
            .chunks(PROGRESS_EVERY)
            .map(|batch| (batch.len(), batch.to_vec().into()))
            .collect();
    };
    let mut runs: Vec<(JobId, JobId, usize)> = Vec::new();
    for &id in ids {
        match runs.last_mut() {
            Some((_, last, len)) if last.get().checked_add(1) == Some(id.get()) => {
                *last = id;
                *len += 1;
            }
            _ => runs.push((id, id, 1)),
        }
    }
    // A long run is cut into runs of a thousand ids, so that progress shows between them.
    let step = PROGRESS_EVERY as i64;
    runs.into_iter()
        .flat_map(|(first, last, _)| {
            (first.get()..=last.get())
                .step_by(PROGRESS_EVERY)
                .map(move |start| (start, start.saturating_add(step - 1).min(last.get())))
        })
        .map(|(start, end)| {
            let len = (end - start + 1) as usize;
            (
                len,
                filter
                    .clone()
                    .ids(JobId::from(start)..=JobId::from(end))
                    .into(),
            )
        })
        .collect()
}

/// Applies the action; on a terminal, with how far it got on stderr every thousand jobs or so,
/// so that a long action shows it is moving.
async fn apply_showing_progress(
    client: &Client,
    verb: Verb,
    ids: &[JobId],
    filter: Option<&JobFilter>,
) -> Result<ActionReport, Failure> {
    let show = ids.len() > PROGRESS_EVERY && std::io::stderr().is_terminal();
    let total = ids.len();
    let (mut seen, mut shown) = (0, 0);
    let mut report = ActionReport::default();
    for (len, selection) in selections(ids, filter) {
        let done = match verb.apply(client, selection).await {
            Ok(done) => done,
            Err(err) => {
                // The error goes on a line of its own, not after the progress.
                if shown > 0 {
                    std::io::stderr().lock().write_all(b"\n")?;
                }
                return Err(err.into());
            }
        };
        report.changed.extend(done.changed);
        report.requested.extend(done.requested);
        report.skipped.extend(done.skipped);
        seen += len;
        if show && (seen - shown >= PROGRESS_EVERY || seen == total) {
            shown = seen;
            let line = format!("\r{}: {seen}/{total} jobs", verb.name());
            std::io::stderr().lock().write_all(line.as_bytes())?;
        }
    }
    if show {
        std::io::stderr().lock().write_all(b"\n")?;
    }
    Ok(report)
}

/// The listed jobs an action by filter left out, having found them no longer in the filter:
/// skipped, with the status each is in now.
async fn left_since_listed(
    client: &Client,
    ids: &[JobId],
    report: &ActionReport,
) -> Result<Vec<(JobId, SkipReason)>, Failure> {
    let reported: std::collections::HashSet<JobId> = (report.changed.iter())
        .chain(&report.requested)
        .chain(report.skipped.iter().map(|(id, _)| id))
        .copied()
        .collect();
    let left: Vec<JobId> = ids
        .iter()
        .filter(|id| !reported.contains(id))
        .copied()
        .collect();
    Ok(statuses(client, &left)
        .await?
        .into_iter()
        .map(|(id, status)| {
            (
                id,
                status.map_or(SkipReason::NotFound, SkipReason::LeftFilter),
            )
        })
        .collect())
}

/// Every job the filter matches, page by page, with the status it was found in.
async fn matches(
    client: &Client,
    filter: JobFilter,
) -> Result<Vec<(JobId, Option<JobStatus>)>, Failure> {
    let mut filter = filter.limit(pgq_core::limits::MAX_PAGE_SIZE);
    let mut ids = Vec::new();
    loop {
        let page = client.jobs(&filter).await?;
        ids.extend(page.jobs.iter().map(|job| (job.id, Some(job.status))));
        match page.next {
            Some(next) => filter = filter.after(next),
            None => break,
        }
    }
    Ok(ids)
}

/// Each job with the status it is in now (`None`: no such job).
async fn statuses(
    client: &Client,
    ids: &[JobId],
) -> Result<Vec<(JobId, Option<JobStatus>)>, Failure> {
    let mut found = Vec::with_capacity(ids.len());
    for &id in ids {
        found.push((id, client.job(id).await?.map(|job| job.status)));
    }
    Ok(found)
}

/// What the action would do to each job, by the status it is in, changing nothing.
fn dry_run(global: &Global, verb: Verb, found: &[(JobId, Option<JobStatus>)]) -> Outcome {
    let would: Vec<JobId> = found
        .iter()
        .filter(|(_, status)| status.is_some_and(|s| verb.statuses().contains(&s)))
        .map(|(id, _)| *id)
        .collect();
    let skip: Vec<(JobId, SkipReason)> = found
        .iter()
        .filter_map(|(id, status)| match status {
            None => Some((*id, SkipReason::NotFound)),
            Some(s) if !verb.statuses().contains(s) => Some((*id, SkipReason::State(*s))),
            Some(_) => None,
        })
        .collect();
    if global.json {
        output::json(&json!({
            "action": verb.command(),
            "dry_run": true,
            "would_change": would,
            "would_skip": skipped_json(&skip),
        }))?;
    } else {
        output::line(&format!(
            "would {} {} jobs{}",
            verb.name(),
            would.len(),
            id_list(&would)
        ))?;
        for (id, reason) in &skip {
            output::line(&format!("would skip job {id}: {reason}"))?;
        }
        output::line("dry run: nothing changed")?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Shows, before the question, what the action is about to touch: the first jobs and a count.
async fn preview(client: &Client, verb: Verb, ids: &[JobId]) -> Result<(), Failure> {
    let mut text = format!("about to {} {} jobs, first:\n", verb.name(), ids.len());
    for &id in ids.iter().take(ASK_ABOVE) {
        if let Some(job) = client.job(id).await? {
            let line = format!(
                "  {}  {}  {}  {}  {}",
                job.id,
                output::printable(&job.task),
                job.queue,
                job.status,
                output::short(job.last_error.as_deref().unwrap_or(""), 50)
            );
            text.push_str(line.trim_end());
            text.push('\n');
        }
    }
    if ids.len() > ASK_ABOVE {
        text.push_str(&format!("  … and {} more\n", ids.len() - ASK_ABOVE));
    }
    std::io::stderr().lock().write_all(text.as_bytes())?;
    Ok(())
}

fn print_report(global: &Global, verb: Verb, report: &ActionReport) -> Result<(), Failure> {
    if global.json {
        output::json(&json!({
            "action": verb.command(),
            "changed": report.changed,
            "requested": report.requested,
            "skipped": skipped_json(&report.skipped),
        }))?;
        return Ok(());
    }
    output::line(&format!(
        "{} {} jobs{}",
        verb.done(),
        report.changed.len(),
        id_list(&report.changed)
    ))?;
    if !report.requested.is_empty() {
        output::line(&format!(
            "asked {} running jobs to stop{}",
            report.requested.len(),
            id_list(&report.requested)
        ))?;
    }
    for (id, reason) in &report.skipped {
        output::line(&format!("cannot {} job {id}: {reason}", verb.name()))?;
    }
    Ok(())
}

fn skipped_json(skipped: &[(JobId, SkipReason)]) -> serde_json::Value {
    json!(
        skipped
            .iter()
            .map(|(id, reason)| {
                let status = match reason {
                    SkipReason::State(status) | SkipReason::LeftFilter(status) => {
                        Some(status.as_str())
                    }
                    _ => None,
                };
                json!({ "id": id, "reason": reason.to_string(), "status": status })
            })
            .collect::<Vec<_>>()
    )
}

/// `: 1, 2, 3` for up to twenty ids, `: 1, 2, … (25)` beyond.
fn id_list(ids: &[JobId]) -> String {
    if ids.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = ids.iter().take(20).map(JobId::to_string).collect();
    if ids.len() > 20 {
        format!(": {}, …", shown.join(", "))
    } else {
        format!(": {}", shown.join(", "))
    }
}

/// Failure when a job named by id was left alone: the caller asked for that job.
fn exit(report: &ActionReport, by_id: bool) -> ExitCode {
    if by_id && !report.skipped.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use pgq_core::{JobFilter, JobId, JobStatus, SkipReason};
    use pgq_testkit::TestDatabase;

    use super::{Verb, apply_showing_progress, left_since_listed, selections};

    /// By filter, a long run of consecutive ids goes a thousand at a time, so that progress
    /// shows between them; a gap starts a new run.
    #[test]
    fn a_long_run_of_listed_ids_is_cut_for_progress() {
        let ids: Vec<JobId> = (1..=2_500).chain([5_000]).map(JobId::from).collect();
        let filter = JobFilter::new().status(JobStatus::Failed);
        let lens: Vec<usize> = selections(&ids, Some(&filter))
            .into_iter()
            .map(|(len, _)| len)
            .collect();
        assert_eq!(lens, [1_000, 1_000, 500, 1]);
    }

    /// A job listed by a filter, then claimed by a worker while the question was read, is
    /// skipped by the action (a forced delete of pending jobs), not overwritten, and reported;
    /// a job that came into the filter meanwhile, never listed, is left alone.
    #[tokio::test]
    async fn a_job_that_left_the_filter_since_it_was_listed_is_skipped() {
        let db = TestDatabase::new().await;
        let mut ids = Vec::new();
        for _ in 0..4 {
            let id: i64 = sqlx::query_scalar(
                "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('T', 'q', '{}') RETURNING id",
            )
            .fetch_one(db.pool())
            .await
            .unwrap();
            ids.push(JobId::from(id));
        }
        sqlx::query(
            "UPDATE pgq.jobs SET status = 'running', phase = 1, worker_id = 'w',
                 claimed_at = now(), started_at = now(), lease_expires_at = now() + interval '1h'
             WHERE id = $1",
        )
        .bind(ids[1].get())
        .execute(db.pool())
        .await
        .unwrap();
        let listed = [ids[0], ids[1], ids[3]];
        let client = db.client();
        let pending = JobFilter::new().status(JobStatus::Pending);
        let verb = Verb::Delete { force: true };
        let mut report = apply_showing_progress(&client, verb, &listed, Some(&pending))
            .await
            .unwrap();
        report
            .skipped
            .extend(left_since_listed(&client, &listed, &report).await.unwrap());
        report.changed.sort();
        assert_eq!(report.changed, vec![ids[0], ids[3]]);
        assert_eq!(
            report.skipped,
            vec![(ids[1], SkipReason::LeftFilter(JobStatus::Running))]
        );
        assert!(client.job(ids[1]).await.unwrap().is_some());
        assert!(client.job(ids[2]).await.unwrap().is_some(), "never listed");
    }
}
