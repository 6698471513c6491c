//! Drains by a fleet: the same jobs drained by 1, 2, 4… worker processes on one queue in turn,
//! each a process of this binary (`--fleet-worker`) with a pool of its own, as workers on many
//! hosts are. Prints `drain_<n>_processes_per_s` for each count.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use pgq_core::{Client, Worker};
use sqlx::ConnectOptions;
use sqlx::postgres::PgConnectOptions;

use crate::Outcome;
use crate::measure::{checkpoint, per_second};
use crate::settings::Settings;
use crate::tasks::enqueue_bulk;

/// How often the benchmark looks whether the drain is done.
const POLL: Duration = Duration::from_millis(10);

pub(crate) async fn run(
    s: &Settings,
    client: &Client,
    options: &PgConnectOptions,
    processes: &[usize],
) -> Outcome {
    let pool = client.pool();
    let total = s.single + s.bulk;
    let url = options.to_url_lossy().to_string();
    for &count in processes {
        sqlx::raw_sql("DELETE FROM pgq.jobs").execute(pool).await?;
        sqlx::raw_sql("VACUUM ANALYZE pgq.jobs")
            .execute(pool)
            .await?;
        enqueue_bulk(client, total, s.bulk_batch).await?;
        checkpoint(pool).await;
        let mut fleet = Vec::with_capacity(count);
        for _ in 0..count {
            fleet.push(start_worker(&url, s.concurrency)?);
        }
        // Every process has connected and built its worker: go.
        let mut stdins = Vec::with_capacity(count);
        for (child, ready) in &mut fleet {
            let mut stdin = child.stdin.take().ok_or("a worker's stdin")?;
            ready.await??;
            stdins.push(stdin_go(&mut stdin).map(|()| stdin)?);
        }
        let started = Instant::now();
        loop {
            let left: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pgq.jobs WHERE phase = 0)
                     OR EXISTS (SELECT 1 FROM pgq.jobs WHERE phase = 1)",
            )
            .fetch_one(pool)
            .await?;
            if !left {
                break;
            }
            tokio::time::sleep(POLL).await;
        }
        let elapsed = started.elapsed();
        // Closing their stdin shuts the workers down.
        drop(stdins);
        for (mut child, _) in fleet {
            let status = tokio::task::spawn_blocking(move || child.wait()).await??;
            if !status.success() {
                return Err(format!("a fleet worker exited with {status}").into());
            }
        }
        let completed: i64 =
            sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = 'completed'")
                .fetch_one(pool)
                .await?;
        assert_eq!(completed as u64, total, "every job completed");
        println!(
            "drain_{count}_processes_per_s {:.0}",
            per_second(total, elapsed)
        );
    }
    Ok(())
}

/// A worker process, and what resolves when it is ready.
fn start_worker(
    url: &str,
    concurrency: usize,
) -> Result<(Child, tokio::task::JoinHandle<std::io::Result<()>>), std::io::Error> {
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--fleet-worker", "--concurrency", &concurrency.to_string()])
        .env("DATABASE_URL", url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let stdout = child.stdout.take().expect("a piped stdout");
    let ready = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        if line.trim() == "ready" {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "a fleet worker said {line:?}"
            )))
        }
    });
    Ok((child, ready))
}

fn stdin_go(stdin: &mut ChildStdin) -> std::io::Result<()> {
    stdin.write_all(b"go\n")?;
    stdin.flush()
}

/// One process of a fleet: builds its worker on `DATABASE_URL`, says `ready`, starts on `go`,
/// and shuts down when its stdin closes.
pub(crate) async fn serve(s: &Settings) -> Outcome {
    let url = std::env::var("DATABASE_URL")?;
    let client = Client::connect(&url).await?;
    let worker = Worker::builder(client)
        .queue("bench", s.concurrency)
        .build()?;
    println!("ready");
    std::io::stdout().flush()?;
    let go = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        std::io::stdin().read_line(&mut line).map(|_| line)
    })
    .await??;
    if go.trim() != "go" {
        return Err(format!("expected go, not {go:?}").into());
    }
    let handle = worker.start();
    tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        while std::io::stdin()
            .read_line(&mut line)
            .is_ok_and(|read| read > 0)
        {
            line.clear();
        }
    })
    .await?;
    handle.shutdown().await?;
    Ok(())
}
