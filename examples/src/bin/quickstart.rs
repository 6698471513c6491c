//! Quickstart: two task types, enqueued and run to completion by a worker.
//!
//! `cargo run -p pgq-examples --bin quickstart` (needs PostgreSQL; see the README).

use std::collections::HashSet;

use pgq_core::{Client, Handler, JobContext, Task, TaskError, Worker, WorkerEvent, async_trait};
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgPoolOptions;

/// Sent once per user: a second enqueue while one is active is a duplicate.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(
    queue = "email",
    priority = 150,
    max_attempts = 5,
    unique_key = "welcome:{user_id}"
)]
struct SendWelcome {
    user_id: i64,
    email: String,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "reports", timeout = "5m")]
struct BuildReport {
    month: String,
}

#[async_trait]
impl Handler for SendWelcome {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        println!(
            "sending welcome mail to {} (attempt {})",
            self.email,
            ctx.attempt()
        );
        Ok(())
    }
}

#[async_trait]
impl Handler for BuildReport {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        println!("building the report for {}", self.month);
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let options = pgq_examples::examples_database().await?;
    // Your application's pool, shared with pgq. `test_before_acquire(false)` spares a ping
    // before every statement (sqlx's default); `Client::connect(url)` builds the same pool.
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .test_before_acquire(false)
        .connect_with(options)
        .await?;
    let client = Client::new(pool);
    client.migrate().await?;

    let welcome = client
        .enqueue(SendWelcome {
            user_id: 42,
            email: "ada@example.com".into(),
        })
        .await?;
    let report = client
        .enqueue(BuildReport {
            month: "2026-11".into(),
        })
        .await?;
    println!("enqueued SendWelcome as job {}", welcome.id());
    println!("enqueued BuildReport as job {}", report.id());

    let worker = Worker::builder(client.clone())
        .queue("email", 16)
        .queue("reports", 2)
        .build()?;
    let mut events = worker.events();
    let handle = worker.start();
    let mut waiting: HashSet<_> = [welcome.id(), report.id()].into();
    while !waiting.is_empty() {
        if let WorkerEvent::JobFinished {
            id, task, outcome, ..
        } = events.recv().await?
            && waiting.remove(&id)
        {
            println!("job {id} ({task}): {outcome:?}");
        }
    }
    handle.shutdown().await?;

    for id in [welcome.id(), report.id()] {
        let job = client.job(id).await?.expect("the job exists");
        println!(
            "job {id} is {} after {} attempt(s)",
            job.status, job.attempts
        );
    }
    Ok(())
}
