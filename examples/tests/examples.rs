//! Every example program runs to a clean exit within a time limit, against a test database.

use std::process::Stdio;
use std::time::Duration;

use pgq_testkit::TestDatabase;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

const LIMIT: Duration = Duration::from_secs(60);

async fn run_to_end(program: &str, db: &TestDatabase, args: &[&str]) -> String {
    let output = tokio::time::timeout(
        LIMIT,
        Command::new(program)
            .args(args)
            .env("DATABASE_URL", db.url())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap_or_else(|_| panic!("{program} did not finish within {LIMIT:?}"))
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{program} failed: {}\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test]
async fn quickstart_runs_both_tasks_to_completion() {
    let db = TestDatabase::new().await;
    let out = run_to_end(env!("CARGO_BIN_EXE_quickstart"), &db, &[]).await;
    assert!(
        out.contains("sending welcome mail to ada@example.com"),
        "{out}"
    );
    assert!(out.contains("building the report for 2026-11"), "{out}");
    assert_eq!(
        out.matches("is completed after 1 attempt(s)").count(),
        2,
        "{out}"
    );
}

#[tokio::test]
async fn transactional_keeps_the_committed_order_and_drops_the_rolled_back_one() {
    let db = TestDatabase::new().await;
    let out = run_to_end(env!("CARGO_BIN_EXE_transactional"), &db, &[]).await;
    assert!(out.contains("receipt jobs run: 1"), "{out}");
    assert_eq!(
        out.matches("sending the receipt for order").count(),
        1,
        "{out}"
    );
}

#[tokio::test]
async fn retries_end_in_failed_with_every_error_kept() {
    let db = TestDatabase::new().await;
    let out = run_to_end(env!("CARGO_BIN_EXE_retries"), &db, &[]).await;
    assert!(out.contains("is failed after 3 attempts"), "{out}");
    for attempt in 1..=3 {
        assert!(
            out.contains(&format!("answered 503 on attempt {attempt}")),
            "{out}"
        );
    }
}

#[tokio::test]
async fn unique_keys_find_duplicates_on_every_path() {
    let db = TestDatabase::new().await;
    let out = run_to_end(env!("CARGO_BIN_EXE_unique_keys"), &db, &[]).await;
    assert!(out.contains("second enqueue: Duplicate"), "{out}");
    assert!(out.contains("reason now \"manual, urgent\""), "{out}");
    assert!(
        out.contains("after the first job finished: Inserted"),
        "{out}"
    );
}

#[tokio::test]
async fn progress_is_watched_to_the_end() {
    let db = TestDatabase::new().await;
    let out = run_to_end(env!("CARGO_BIN_EXE_progress"), &db, &[]).await;
    assert!(out.contains("running  40% decode"), "{out}");
    assert!(
        out.trim_end().ends_with("completed 100% upload (4 events)"),
        "{out}"
    );
}

#[tokio::test]
async fn the_unit_tested_handler_also_runs_under_a_worker() {
    let db = TestDatabase::new().await;
    let out = run_to_end(env!("CARGO_BIN_EXE_handler_testing"), &db, &[]).await;
    assert!(
        out.contains("ChargeInvoice") && out.contains("Completed"),
        "{out}"
    );
    assert!(out.contains("queued for review"), "{out}");
}

/// Starts the graceful-shutdown example, sends SIGTERM once its job started, and returns its
/// output after it exits.
async fn terminate_mid_job(db: &TestDatabase, work_ms: &str, grace_ms: &str) -> String {
    let mut child = Command::new(env!("CARGO_BIN_EXE_graceful_shutdown"))
        .args(["--work-ms", work_ms, "--grace-ms", grace_ms])
        .env("DATABASE_URL", db.url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut out = String::new();
    let started = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            out.push_str(&line);
            out.push('\n');
            if line.starts_with("started job") {
                return;
            }
        }
        panic!("exited before starting its job:\n{out}");
    };
    tokio::time::timeout(LIMIT, started)
        .await
        .expect("job never started");
    let pid = child.id().unwrap().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(killed.success());
    let rest = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            out.push_str(&line);
            out.push('\n');
        }
        child.wait().await.unwrap()
    };
    let status = tokio::time::timeout(LIMIT, rest)
        .await
        .expect("did not exit after SIGTERM");
    assert!(status.success(), "exit {status}:\n{out}");
    out
}

#[tokio::test]
async fn sigterm_lets_the_running_job_finish_within_the_grace_period() {
    let db = TestDatabase::new().await;
    let out = terminate_mid_job(&db, "500", "30000").await;
    assert!(out.contains("finished job"), "{out}");
    assert!(out.contains("is completed (1 attempts spent)"), "{out}");
}

#[tokio::test]
async fn sigterm_releases_a_job_that_outlasts_the_grace_period() {
    let db = TestDatabase::new().await;
    let out = terminate_mid_job(&db, "600000", "100").await;
    assert!(!out.contains("finished job"), "{out}");
    assert!(out.contains("is pending (0 attempts spent)"), "{out}");
    let held: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status IN ('claimed', 'running')")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(held, 0, "nothing stays claimed by the exited process");
}
