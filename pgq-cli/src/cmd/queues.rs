//! `pgq queues`: list them; pause, resume, limit or rate-limit one.

use std::process::ExitCode;

use serde_json::json;

use crate::args::{Global, QueuesCommand};
use crate::connect;
use crate::failure::{Failure, Outcome};
use crate::output;

pub(crate) async fn run(global: &Global, command: &QueuesCommand) -> Outcome {
    let client = connect::client(global).await?;
    let (name, paused) = match command {
        QueuesCommand::List => return list(global, &client).await,
        QueuesCommand::Pause { name } => {
            client.pause_queue(name).await?;
            (name, true)
        }
        QueuesCommand::Resume { name } => {
            // A name mistyped would otherwise read as resumed while the paused queue stays so.
            let paused = client
                .queues()
                .await?
                .into_iter()
                .any(|q| q.name == *name && q.paused_at.is_some());
            if !paused {
                return Err(Failure::Failed(format!(
                    "queue {} is not paused: nothing to resume",
                    output::printable(name)
                )));
            }
            client.resume_queue(name).await?;
            (name, false)
        }
        QueuesCommand::Limit { name, limit } => {
            client.set_queue_limit(name, limit.0).await?;
            if global.json {
                output::json(&json!({ "queue": name, "limit": limit.0 }))?;
            } else if let Some(limit) = limit.0 {
                output::line(&format!(
                    "queue {name}: at most {limit} jobs at once across all workers, within a second"
                ))?;
            } else {
                output::line(&format!("queue {name}: no concurrency limit"))?;
            }
            return Ok(ExitCode::SUCCESS);
        }
        QueuesCommand::Rate { name, rate } => {
            client.set_queue_rate(name, rate.0).await?;
            if global.json {
                let rate = rate.0.map(|rate| rate.to_string());
                output::json(&json!({ "queue": name, "rate": rate }))?;
            } else if let Some(rate) = rate.0 {
                output::line(&format!(
                    "queue {name}: {rate} job starts across all workers, in bursts of up to {}, within a second",
                    rate.jobs()
                ))?;
            } else {
                output::line(&format!("queue {name}: no rate limit"))?;
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    if global.json {
        output::json(&json!({ "queue": name, "paused": paused }))?;
    } else if paused {
        output::line(&format!(
            "queue {name} paused: workers stop claiming from it within a second; running jobs finish"
        ))?;
    } else {
        output::line(&format!("queue {name} resumed"))?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(global: &Global, client: &pgq_core::Client) -> Outcome {
    let queues = client.queues().await?;
    if global.json {
        let queues: Vec<_> = queues
            .iter()
            .map(|q| {
                json!({
                    "name": q.name,
                    "paused_at": q.paused_at,
                    "workers": q.workers,
                    "limit": q.limit,
                    "rate": q.rate.map(|rate| rate.to_string()),
                    "due": q.stats.due,
                    "scheduled": q.stats.scheduled,
                    "claimed": q.stats.claimed,
                    "running": q.stats.running,
                    "held": q.stats.running + q.stats.claimed,
                })
            })
            .collect();
        output::json(&json!(queues))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = queues
        .iter()
        .map(|q| {
            vec![
                q.name.clone(),
                q.paused_at.map_or_else(
                    || "running".into(),
                    |at| format!("paused {}", output::time(at)),
                ),
                q.workers.to_string(),
                q.limit
                    .map_or_else(|| "-".into(), |limit| limit.to_string()),
                q.rate.map_or_else(|| "-".into(), |rate| rate.to_string()),
                q.stats.due.to_string(),
                q.stats.scheduled.to_string(),
                (q.stats.running + q.stats.claimed).to_string(),
            ]
        })
        .collect();
    output::table(
        &[
            "queue",
            "state",
            "workers",
            "limit",
            "rate",
            "due",
            "scheduled",
            "held",
        ],
        &rows,
    )?;
    Ok(ExitCode::SUCCESS)
}
