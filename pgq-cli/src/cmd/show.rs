//! `pgq jobs show ID`: one job whole: payload, error history, progress and timing.

use std::process::ExitCode;

use pgq_core::JobId;

use crate::args::Global;
use crate::connect;
use crate::failure::{Failure, Outcome};
use crate::output;

pub(crate) async fn run(global: &Global, id: JobId) -> Outcome {
    let client = connect::client(global).await?;
    let job = client
        .job(id)
        .await?
        .ok_or_else(|| Failure::Failed(format!("job {id} not found")))?;
    if global.json {
        let value = serde_json::to_value(&job)
            .map_err(|err| Failure::Failed(format!("cannot show job {id}: {err}")))?;
        output::json(&value)?;
        return Ok(ExitCode::SUCCESS);
    }
    let field = |name: &str, value: String| format!("{name:<12} {}", output::printable(&value));
    let mut lines = vec![
        field("id", job.id.to_string()),
        field("task", job.task.clone()),
        field("queue", job.queue.clone()),
        field("status", job.status.to_string()),
        field("priority", job.priority.to_string()),
        field(
            "attempts",
            format!("{} of {}", job.attempts, job.max_attempts),
        ),
        field(
            "unique key",
            job.unique_key.clone().unwrap_or_else(|| "-".into()),
        ),
        field(
            "progress",
            format!(
                "{}% {}",
                job.progress,
                job.current_stage.as_deref().unwrap_or("")
            ),
        ),
        field(
            "worker",
            job.worker_id.clone().unwrap_or_else(|| "-".into()),
        ),
        field("created", output::time(job.created_at)),
        field("run at", output::time(job.run_at)),
        field("started", output::maybe_time(job.started_at)),
        field("finished", output::maybe_time(job.completed_at)),
    ];
    if let (Some(started), Some(finished)) = (job.started_at, job.completed_at) {
        let ran = (finished - started).num_milliseconds() as f64 / 1000.0;
        lines.push(field("ran for", format!("{ran:.3}s")));
    }
    if let Some(requested) = job.cancel_requested_at {
        lines.push(field("cancel asked", output::time(requested)));
    }
    if let Some(meta) = &job.meta {
        lines.push(field("meta", meta.to_string()));
    }
    let payload = serde_json::to_string_pretty(&job.payload).unwrap_or_default();
    lines.push(String::new());
    lines.push("payload:".into());
    // JSON escapes only U+0000 to U+001F; DEL and C1 controls would reach the terminal raw.
    lines.extend(
        payload
            .lines()
            .map(|line| format!("  {}", output::printable(line))),
    );
    if !job.errors.is_empty() {
        lines.push(String::new());
        lines.push("errors, oldest first:".into());
        for error in &job.errors {
            lines.push(format!(
                "  attempt {} at {}: {}",
                error.attempt,
                output::time(error.at),
                output::printable(&error.error)
            ));
        }
    }
    output::line(&lines.join("\n"))?;
    Ok(ExitCode::SUCCESS)
}
