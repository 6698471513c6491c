//! `pgq stats`: per-queue counts, lag and rates.

use std::process::ExitCode;

use serde_json::json;

use crate::args::Global;
use crate::connect;
use crate::failure::Outcome;
use crate::output;

pub(crate) async fn run(global: &Global) -> Outcome {
    let client = connect::client(global).await?;
    let stats = client.stats().await?;
    if global.json {
        let queues: Vec<_> = stats
            .iter()
            .map(|q| {
                json!({
                    "queue": q.queue,
                    "due": q.due,
                    "scheduled": q.scheduled,
                    "claimed": q.claimed,
                    "running": q.running,
                    "oldest_due_age_secs": q.oldest_due_age.map(|age| age.as_secs_f64()),
                    "completed_per_minute": q.completed_per_minute,
                    "failed_per_minute": q.failed_per_minute,
                    "cancelled_per_minute": q.cancelled_per_minute,
                })
            })
            .collect();
        output::json(&json!(queues))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = stats
        .iter()
        .map(|q| {
            vec![
                q.queue.clone(),
                q.due.to_string(),
                q.scheduled.to_string(),
                q.claimed.to_string(),
                q.running.to_string(),
                q.oldest_due_age
                    .map_or_else(|| "-".into(), |age| format!("{:.1}s", age.as_secs_f64())),
                format!("{:.1}", q.completed_per_minute),
                format!("{:.1}", q.failed_per_minute),
            ]
        })
        .collect();
    output::table(
        &[
            "queue",
            "due",
            "scheduled",
            "claimed",
            "running",
            "lag",
            "done/min",
            "failed/min",
        ],
        &rows,
    )?;
    Ok(ExitCode::SUCCESS)
}
