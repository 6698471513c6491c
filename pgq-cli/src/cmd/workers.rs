//! `pgq workers`: the live worker processes.

use std::process::ExitCode;

use serde_json::json;

use crate::args::Global;
use crate::connect;
use crate::failure::Outcome;
use crate::output;

pub(crate) async fn run(global: &Global) -> Outcome {
    let client = connect::client(global).await?;
    let workers = client.workers().await?;
    if global.json {
        let workers: Vec<_> = workers
            .iter()
            .map(|w| {
                json!({
                    "id": w.id,
                    "host": w.host,
                    "pid": w.pid,
                    "queues": w.queues,
                    "held": w.held,
                    "started_at": w.started_at,
                    "heartbeat_at": w.heartbeat_at,
                })
            })
            .collect();
        output::json(&json!(workers))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = workers
        .iter()
        .map(|w| {
            let queues: Vec<String> = w.queues.iter().map(|(q, n)| format!("{q}:{n}")).collect();
            vec![
                w.id.clone(),
                w.host.clone(),
                w.pid.to_string(),
                queues.join(","),
                w.held.to_string(),
                output::time(w.started_at),
                output::time(w.heartbeat_at),
            ]
        })
        .collect();
    output::table(
        &[
            "id",
            "host",
            "pid",
            "queues",
            "held",
            "started",
            "heartbeat",
        ],
        &rows,
    )?;
    Ok(ExitCode::SUCCESS)
}
