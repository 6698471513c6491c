//! `pgq schedules`: the periodic schedules, with their last and next run and their leader.

use std::process::ExitCode;

use serde_json::json;

use crate::args::Global;
use crate::connect;
use crate::failure::Outcome;
use crate::output;

pub(crate) async fn run(global: &Global) -> Outcome {
    let client = connect::client(global).await?;
    let schedules = client.schedules().await?;
    if global.json {
        let schedules: Vec<_> = schedules
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "task": s.task,
                    "cron": s.cron,
                    "time_zone": s.time_zone,
                    "missed": s.missed.map(|missed| missed.to_string()),
                    "last_run": s.last_run,
                    "last_job": s.last_job.map(|id| id.get()),
                    "next_run": s.next_run,
                    "leader": s.leader,
                })
            })
            .collect();
        output::json(&json!(schedules))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            vec![
                output::short(&s.name, 40),
                output::short(&s.task, 40),
                output::short(&s.cron, 40),
                output::short(&s.time_zone, 32),
                s.missed
                    .map_or_else(|| "?".into(), |missed| missed.to_string()),
                output::maybe_time(s.last_run),
                output::maybe_time(s.next_run),
                s.leader
                    .as_deref()
                    .map_or_else(|| "none".into(), |leader| output::short(leader, 60)),
            ]
        })
        .collect();
    output::table(
        &[
            "name", "task", "cron", "zone", "missed", "last run", "next run", "leader",
        ],
        &rows,
    )?;
    Ok(ExitCode::SUCCESS)
}
