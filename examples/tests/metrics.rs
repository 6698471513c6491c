//! pgq's metrics (the `metrics` feature): read back from a recorder in this process, and
//! scraped from the Prometheus example over HTTP.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use metrics_util::debugging::{DebugValue, DebuggingRecorder};
use pgq_core::{Handler, JobContext, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::Command;

const LIMIT: Duration = Duration::from_secs(60);

/// Waits in a queue no worker of the test serves.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "unserved")]
struct Unserved;

#[async_trait]
impl Handler for Unserved {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// Runs until its worker's shutdown gives up on it.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "stuck")]
struct Stuck;

#[async_trait]
impl Handler for Stuck {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        std::future::pending().await
    }
}

/// Succeeds, or fails every attempt, as its payload says.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "metered", max_attempts = 2)]
struct Metered {
    outcome: String,
}

#[async_trait]
impl Handler for Metered {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        match self.outcome.as_str() {
            "fail" => Err(TaskError::retry("always fails")),
            _ => Ok(()),
        }
    }

    fn backoff(_attempt: i32) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

#[tokio::test]
async fn every_outcome_is_counted_and_timed_by_task_and_queue() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    recorder
        .install()
        .expect("the only recorder of this test binary");

    let db = TestDatabase::new().await;
    let client = db.client();
    let outcomes = ["ok", "ok", "ok", "fail"];
    client
        .enqueue_many(outcomes.map(|outcome| Metered {
            outcome: outcome.into(),
        }))
        .await
        .unwrap();
    let worker = Worker::builder(client.clone())
        .queue("metered", 2)
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let handle = worker.start();
    tokio::time::timeout(
        LIMIT,
        handle
            .stats()
            .wait_for(|s| s.completed == 3 && s.failed == 1),
    )
    .await
    .expect("every job ends")
    .unwrap();
    handle.shutdown().await.unwrap();

    let mut counters = HashMap::new();
    let mut histograms = HashMap::new();
    let mut gauges = Vec::new();
    for (key, _, _, value) in snapshotter.snapshot().into_vec() {
        let key = key.key();
        let labels: HashMap<&str, &str> = key.labels().map(|l| (l.key(), l.value())).collect();
        if labels.get("queue").is_some_and(|q| *q != "metered") {
            continue;
        }
        let outcome = labels.get("outcome").map(|o| o.to_string());
        match value {
            DebugValue::Counter(n) => {
                assert_eq!(labels.get("task"), Some(&"Metered"), "{key:?}");
                counters.insert((key.name().to_owned(), outcome), n);
            }
            DebugValue::Histogram(values) => {
                histograms.insert(key.name().to_owned(), values.len());
            }
            DebugValue::Gauge(_) => gauges.push(key.name().to_owned()),
        }
    }
    let count = |name: &str, outcome: Option<&str>| {
        counters
            .get(&(name.to_owned(), outcome.map(str::to_owned)))
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(count("pgq_jobs_enqueued_total", None), 4);
    assert_eq!(count("pgq_attempts_total", Some("completed")), 3);
    assert_eq!(count("pgq_attempts_total", Some("retried")), 1);
    assert_eq!(count("pgq_attempts_total", Some("failed")), 1);
    // Five attempts ran: each is timed, from its job's run_at and for its handler.
    assert_eq!(histograms.get("pgq_job_run_seconds"), Some(&5));
    assert_eq!(histograms.get("pgq_job_wait_seconds"), Some(&5));
    for gauge in [
        "pgq_worker_held_jobs",
        "pgq_queue_jobs",
        "pgq_queue_oldest_due_seconds",
    ] {
        assert!(gauges.iter().any(|g| g == gauge), "{gauge} in {gauges:?}");
    }

    // A schedule's jobs are counted as every other enqueue's.
    let mut clock = pgq_testkit::ScheduleClock::start(&client, chrono::Utc::now())
        .await
        .with(pgq_core::Schedule::cron("0 * * * * *"), || Metered {
            outcome: "ok".into(),
        })
        .await;
    let tick = clock.next_tick().await.expect("a minutely schedule ticks");
    assert_eq!(tick.jobs.len(), 1);
    let enqueued = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .find_map(|(key, _, _, value)| {
            let labels: Vec<(String, String)> = key
                .key()
                .labels()
                .map(|l| (l.key().to_owned(), l.value().to_owned()))
                .collect();
            let metered = labels.contains(&("queue".into(), "metered".into()));
            match value {
                DebugValue::Counter(n)
                    if key.key().name() == "pgq_jobs_enqueued_total" && metered =>
                {
                    Some(n)
                }
                _ => None,
            }
        });
    // The recorder's snapshots report what was added since the last one.
    assert_eq!(enqueued, Some(1));

    // The queues' depth follows the jobs waiting, whatever the finished jobs beside them: a
    // worker's own queue with only finished jobs reads empty, a queue it does not serve reads
    // its waiting job, and empty again once that job is gone.
    let depth = |queue: &str, status: &str| {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find_map(|(key, _, _, value)| {
                let key = key.key();
                let labels: HashMap<&str, &str> =
                    key.labels().map(|l| (l.key(), l.value())).collect();
                match value {
                    DebugValue::Gauge(value)
                        if key.name() == "pgq_queue_jobs"
                            && labels.get("queue") == Some(&queue)
                            && labels.get("status") == Some(&status) =>
                    {
                        Some(value.into_inner())
                    }
                    _ => None,
                }
            })
    };
    let waiting = client.enqueue(Unserved).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("metered", 2)
        .rescue_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    let handle = worker.start();
    let settled = |want: f64| async move {
        tokio::time::timeout(LIMIT, async {
            while depth("unserved", "due") != Some(want)
                || depth("metered", "due") != Some(0.0)
                || depth("metered", "running") != Some(0.0)
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
    };
    settled(1.0)
        .await
        .expect("the unserved queue reads its waiting job");
    client.cancel(waiting).await.unwrap();
    settled(0.0)
        .await
        .expect("the unserved queue reads empty again");
    handle.shutdown().await.unwrap();

    // The held jobs' gauge reads what a running worker holds, and nothing once it has stopped,
    // though its last heartbeat saw a job held: a process that keeps serving its metrics after
    // a worker's shutdown must not report that job held for ever.
    let held = || {
        snapshotter
            .snapshot()
            .into_vec()
            .into_iter()
            .find_map(|(key, _, _, value)| match value {
                DebugValue::Gauge(value) if key.key().name() == "pgq_worker_held_jobs" => {
                    Some(value.into_inner())
                }
                _ => None,
            })
    };
    client.enqueue(Stuck).await.unwrap();
    let worker = Worker::builder(client.clone())
        .queue("stuck", 1)
        // Long enough that no heartbeat comes between the release and the worker's end.
        .heartbeat_interval(Duration::from_secs(1))
        .shutdown_grace(Duration::from_millis(100))
        .build()
        .unwrap();
    let handle = worker.start();
    // The heartbeat sets the gauge, then writes the same count to the worker's registration:
    // read there, since a snapshot of the recorder resets a gauge it reads.
    tokio::time::timeout(LIMIT, async {
        while !client.workers().await.unwrap().iter().any(|w| w.held == 1) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("a heartbeat reports the stuck job held");
    handle.shutdown().await.unwrap();
    assert_eq!(held(), Some(0.0), "a stopped worker holds nothing");
}

#[tokio::test]
async fn the_prometheus_example_serves_pgq_metrics_for_scraping() {
    let db = TestDatabase::new().await;
    let mut example = Command::new(env!("CARGO_BIN_EXE_prometheus"))
        .args(["--listen", "127.0.0.1:0", "--jobs", "14"])
        .env("DATABASE_URL", db.url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(example.stdout.take().unwrap()).lines();
    let mut address = None;
    tokio::time::timeout(LIMIT, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("metrics at http://") {
                address = url.strip_suffix("/metrics").map(str::to_owned);
            }
            if line.starts_with("all 14 reports ran") {
                return;
            }
        }
        panic!("the example ended before its jobs did");
    })
    .await
    .expect("the example runs its jobs");
    let address = address.expect("the example tells where it serves");

    let mut stream = TcpStream::connect(&address).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nhost: pgq\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    let sample = |name: &str, label: &str| -> f64 {
        response
            .lines()
            .find(|line| line.starts_with(&format!("{name}{{")) && line.contains(label))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {name} with {label} in\n{response}"))
    };
    // Every seventh of the 14 reports fails for good: 2 failed, 12 completed.
    assert_eq!(sample("pgq_jobs_enqueued_total", "queue=\"reports\""), 14.0);
    assert_eq!(sample("pgq_attempts_total", "outcome=\"completed\""), 12.0);
    assert_eq!(sample("pgq_attempts_total", "outcome=\"failed\""), 2.0);
    assert_eq!(
        sample("pgq_job_run_seconds_count", "queue=\"reports\""),
        14.0
    );
    // Histograms, as docs/observability.md says: buckets that add up across workers.
    for histogram in ["pgq_job_run_seconds", "pgq_job_wait_seconds"] {
        assert!(
            response.contains(&format!("# TYPE {histogram} histogram")),
            "{histogram} in\n{response}"
        );
    }
    assert!(sample("pgq_job_run_seconds_bucket", "le=\"+Inf\"") >= 1.0);
    example.kill().await.unwrap();
}
