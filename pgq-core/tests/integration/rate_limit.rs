//! A queue's rate limit spends its tokens on the jobs it starts: the jobs a claim passes over —
//! locked by another transaction, or of a concurrency key at its limit — give their tokens back.
//! Each test's bucket refills one token in minutes, so a token spent in vain is missed within
//! the test's time limit.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{Client, Handler, JobContext, RateLimit, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::Semaphore;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(name = "rate_limit.keyed", queue = "tokens")]
#[task(concurrency_key = "{key}", concurrency = 1)]
struct Keyed {
    key: String,
    n: u32,
}

#[async_trait]
impl Handler for Keyed {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(name = "rate_limit.plain", queue = "tokens")]
struct Plain {
    n: u32,
}

#[async_trait]
impl Handler for Plain {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        support::pass_gate(ctx).await;
        Ok(())
    }
}

/// `jobs` tokens, one more every ten minutes divided by `jobs`.
async fn rate_limited(client: &Client, jobs: u32) {
    let rate = RateLimit::new(jobs, Duration::from_secs(600));
    client.set_queue_rate("tokens", rate).await.unwrap();
}

fn worker(client: &Client, gate: &Arc<Semaphore>) -> Worker {
    Worker::builder(client.clone())
        .queue("tokens", 4)
        .poll_interval(Duration::from_millis(100))
        .state(gate.clone())
        .build()
        .unwrap()
}

async fn held(db: &TestDatabase) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE phase = 1")
        .fetch_one(db.pool())
        .await
        .unwrap()
}

async fn tokens(db: &TestDatabase) -> f64 {
    sqlx::query_scalar("SELECT tokens FROM pgq.queues WHERE name = 'tokens'")
        .fetch_one(db.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn a_key_at_its_limit_spends_none_of_the_queue_tokens() {
    let db = TestDatabase::new().await;
    let client = db.client();
    rate_limited(&client, 3).await;
    let hot = |n| Keyed {
        key: "hot".into(),
        n,
    };
    client.enqueue_many((0..3).map(hot)).await.unwrap();
    let gate = Arc::new(Semaphore::new(0));
    let worker = worker(&client, &gate).start();

    // The hot key's first job runs; its other two wait for the key's slot.
    support::eventually(|| async { (held(&db).await == 1).then_some(()) }).await;
    client
        .enqueue_many((0..2).map(|n| Plain { n }))
        .await
        .unwrap();
    // The two tokens the waiting hot jobs did not use start the plain jobs at once.
    support::eventually(|| async { (held(&db).await == 3).then_some(()) }).await;
    let left = tokens(&db).await;
    assert!(
        left < 1.0,
        "three jobs started, three tokens taken: {left} left"
    );

    gate.add_permits(100);
    worker.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_job_locked_elsewhere_spends_none_of_the_queue_tokens() {
    let db = TestDatabase::new().await;
    let client = db.client();
    rate_limited(&client, 2).await;
    let locked = client.enqueue(Plain { n: 1 }).await.unwrap().id();
    let free = client.enqueue(Plain { n: 2 }).await.unwrap().id();
    // Another transaction holds the first job's row, as an open replace of it would.
    let mut holder = db.pool().begin().await.unwrap();
    sqlx::query("SELECT 1 FROM pgq.jobs WHERE id = $1 FOR UPDATE")
        .bind(locked.get())
        .execute(&mut *holder)
        .await
        .unwrap();
    let gate = Arc::new(Semaphore::new(100));
    let worker = worker(&client, &gate);
    let mut events = worker.events();
    let worker = worker.start();

    support::finished(&mut events, free).await;
    let left = tokens(&db).await;
    assert!(
        left >= 1.0,
        "the locked job's token is still there: {left} left"
    );
    holder.rollback().await.unwrap();
    // It starts at its worker's next poll, with its own token.
    support::finished(&mut events, locked).await;
    worker.shutdown().await.unwrap();
}

/// A rate a hand-written `UPDATE` gave a period longer than `RateLimit::new` takes is still
/// enforced by the claims, and `queues()` shows it rather than no rate at all.
#[tokio::test]
async fn a_stored_rate_with_a_long_period_is_shown_as_it_is_enforced() {
    let db = TestDatabase::new().await;
    let client = db.client();
    client
        .set_queue_rate("tokens", RateLimit::new(1, Duration::from_secs(60)))
        .await
        .unwrap();
    sqlx::query("UPDATE pgq.queues SET rate_period_ms = 172800000 WHERE name = 'tokens'")
        .execute(db.pool())
        .await
        .unwrap();
    let queue = client
        .queues()
        .await
        .unwrap()
        .into_iter()
        .find(|q| q.name == "tokens")
        .expect("the queue is listed");
    let rate = queue.rate.expect("the rate the claims enforce");
    assert_eq!(
        (rate.jobs(), rate.period()),
        (1, Duration::from_secs(48 * 3600))
    );
}
