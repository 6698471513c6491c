//! A dead network never wedges a worker: with every connection of a worker going through a proxy
//! that swallows bytes and sends nothing back — a dropped route, a failover, a pulled cable — the
//! worker notices, replaces its connections once the network passes again, starts a job enqueued
//! after that within its poll interval and the statement timeout, loses nothing and completes
//! nothing twice.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    Client, Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker, async_trait,
};
use pgq_test_support::{ProxyMode, TcpProxy};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::postgres::PgPoolOptions;
use tokio::sync::Semaphore;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "netsplit")]
struct AcrossTheSplit {
    gated: bool,
}

#[async_trait]
impl Handler for AcrossTheSplit {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if self.gated {
            support::pass_gate(ctx).await;
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_worker_behind_a_blackholed_network_recovers_and_loses_nothing() {
    let db = TestDatabase::new().await;
    let direct = db.client();
    let server = db.connect_options();
    let upstream = format!("{}:{}", server.get_host(), server.get_port())
        .parse()
        .expect("a socket address");
    let proxy = TcpProxy::new(upstream).await;
    let pool = PgPoolOptions::new()
        .max_connections(5)
        .test_before_acquire(false)
        .connect_with(proxy.connect_options(&server))
        .await
        .unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let worker = Worker::builder(Client::new(pool))
        .queue("netsplit", 2)
        .state(gate.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();

    // A job runs while the network goes silent; its completion must still land, once.
    let running = direct
        .enqueue(AcrossTheSplit { gated: true })
        .await
        .unwrap()
        .id();
    support::event(
        &mut events,
        |e| matches!(e, pgq_core::WorkerEvent::JobStarted { id, .. } if *id == running),
    )
    .await;
    proxy.set_mode(ProxyMode::Blackhole);
    gate.add_permits(1);
    let during = direct
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    tokio::time::sleep(Duration::from_secs(3)).await; // the outage, not a wait for work
    proxy.set_mode(ProxyMode::Pass);

    let after = direct
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    let started = std::time::Instant::now();
    let outcomes = support::all_finished(&mut events, &[running, during, after]).await;
    assert!(
        started.elapsed() < Duration::from_secs(1 + 15),
        "the worker took {:?} to recover",
        started.elapsed()
    );
    for id in [running, during, after] {
        assert_eq!(outcomes[&id], JobOutcome::Completed, "job {id}");
        let job = direct.job(id).await.unwrap().unwrap();
        assert_eq!(
            (job.status, job.attempts),
            (JobStatus::Completed, 1),
            "job {id} ran once"
        );
    }
    handle.shutdown().await.unwrap();
}

/// A tick whose connection died waits at most a second before the queue claims again, however
/// long the poll interval of a worker that leans on notifications.
#[tokio::test]
async fn a_failed_tick_stalls_its_queue_a_second_at_most() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let worker = Worker::builder(client.clone())
        .queue("netsplit", 1)
        .dispatch_connections(1)
        .poll_interval(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let first = client
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    assert_eq!(
        support::finished(&mut events, first).await.0,
        JobOutcome::Completed
    );
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE datname = current_database() AND application_name = 'pgq-dispatch:netsplit'",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    assert!(!killed.is_empty() && killed.iter().all(|k| *k));
    // Woken by its notification, the claim finds its connection dead; within the test's limit
    // (a third of the poll interval) the next one runs it.
    let second = client
        .enqueue(AcrossTheSplit { gated: false })
        .await
        .unwrap()
        .id();
    assert_eq!(
        support::finished(&mut events, second).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
}
