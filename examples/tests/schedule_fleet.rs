//! A schedule that fires every second, run by three worker processes of the fleet example:
//! every instant is enqueued exactly once, none missing and none twice, also when the leader is
//! killed with SIGKILL and another process takes over its lease. The schedule keeps the default
//! policy (skip missed instants): a takeover within the lease is well within the grace in which
//! late instants still run, so none is missed.

mod fleet;

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use pgq_testkit::TestDatabase;
use sqlx::PgPool;
use tokio::process::Child;

const LIMIT: Duration = Duration::from_secs(40);

/// The leader lease the processes run with: a dead leader is replaced within about this long.
const LEADER_LEASE_MS: &str = "2000";

/// Starts one worker process running the every-second schedule; returns it and its worker id.
async fn start_worker(db: &TestDatabase) -> (Child, String) {
    let args = ["--concurrency", "2", "--every-second", "1"];
    let (worker, id, _) = fleet::start_worker(
        db,
        &[&args[..], &["--leader-lease-ms", LEADER_LEASE_MS]].concat(),
    )
    .await;
    (worker, id)
}

/// Every `FleetTick` instant enqueued so far (its `run_at`), oldest first, duplicates kept.
async fn instants(pool: &PgPool) -> Vec<DateTime<Utc>> {
    sqlx::query_scalar("SELECT run_at FROM pgq.jobs WHERE task = 'FleetTick' ORDER BY run_at")
        .fetch_all(pool)
        .await
        .unwrap()
}

/// Polls the jobs until `done` says enough instants are there; returns them.
async fn instants_until(
    pool: &PgPool,
    done: impl Fn(&[DateTime<Utc>]) -> bool,
) -> Vec<DateTime<Utc>> {
    tokio::time::timeout(LIMIT, async {
        loop {
            let instants = instants(pool).await;
            if done(&instants) {
                return instants;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the schedule kept enqueueing")
}

/// One instant a second from the first to the last: none missing, none twice.
fn assert_every_second_once(instants: &[DateTime<Utc>]) {
    for pair in instants.windows(2) {
        assert_eq!(
            pair[1] - pair[0],
            TimeDelta::seconds(1),
            "instants missing or twice around {}: {instants:?}",
            pair[0]
        );
    }
}

async fn leader(pool: &PgPool) -> Option<String> {
    sqlx::query_scalar("SELECT holder FROM pgq.leaders WHERE expires_at > now()")
        .fetch_optional(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn three_processes_enqueue_ten_instants_in_ten_seconds_exactly_once() {
    let db = TestDatabase::new().await;
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(start_worker(&db).await);
    }
    // Ten seconds of the schedule: the first instant and the nine after it.
    let first = instants_until(db.pool(), |instants| !instants.is_empty()).await[0];
    let tenth = first + TimeDelta::seconds(9);
    let all = instants_until(db.pool(), |instants| instants.iter().any(|i| *i >= tenth)).await;
    let window: Vec<_> = all.iter().filter(|i| **i <= tenth).collect();
    assert_eq!(window.len(), 10, "{all:?}");
    assert_every_second_once(&all);
    // One leader among the three.
    let leader = leader(db.pool()).await.expect("a leader");
    assert!(workers.iter().any(|(_, id)| *id == leader));
}

#[tokio::test]
async fn a_killed_leader_is_replaced_within_its_lease_and_no_instant_is_lost_or_doubled() {
    let db = TestDatabase::new().await;
    let mut workers: HashMap<String, Child> = HashMap::new();
    for _ in 0..3 {
        let (child, id) = start_worker(&db).await;
        workers.insert(id, child);
    }
    let first = instants_until(db.pool(), |instants| instants.len() >= 3).await[0];
    let dead = leader(db.pool()).await.expect("a leader");
    let mut child = workers
        .remove(&dead)
        .expect("the leader is one of the processes");
    child.start_kill().unwrap(); // SIGKILL: no shutdown, no resignation
    child.wait().await.unwrap();
    let killed_at: DateTime<Utc> = sqlx::query_scalar("SELECT now()")
        .fetch_one(db.pool())
        .await
        .unwrap();

    // Another process takes the lead once the dead one's lease runs out.
    let successor = tokio::time::timeout(LIMIT, async {
        loop {
            if let Some(holder) = leader(db.pool()).await
                && holder != dead
            {
                return holder;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("another process takes the lead");
    assert!(workers.contains_key(&successor));
    let elected_at: DateTime<Utc> =
        sqlx::query_scalar("SELECT elected_at FROM pgq.leaders WHERE holder = $1")
            .bind(&successor)
            .fetch_one(db.pool())
            .await
            .unwrap();
    let lease = TimeDelta::milliseconds(LEADER_LEASE_MS.parse().unwrap());
    // Within the lease, plus the quarter of it between the survivors' tries.
    assert!(
        elected_at - killed_at <= lease + lease / 4 + TimeDelta::milliseconds(500),
        "taken over {} after the kill",
        elected_at - killed_at
    );

    // The instants go on from where the dead leader stopped, each once.
    let resumed = killed_at + TimeDelta::seconds(3);
    let all = instants_until(db.pool(), |instants| instants.iter().any(|i| *i >= resumed)).await;
    assert_eq!(all[0], first);
    assert_every_second_once(&all);
    let (last_job, leader_pid): (i64, i64) = sqlx::query_as(
        "SELECT id, (payload->>'pid')::bigint FROM pgq.jobs
         WHERE task = 'FleetTick' ORDER BY run_at DESC LIMIT 1",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert!(last_job > 0);
    let successor_pid = i64::from(workers[&successor].id().expect("running"));
    assert_eq!(leader_pid, successor_pid, "the successor enqueues now");
}
