//! The fleet example's worker processes, as the multi-process tests start them.

use std::process::Stdio;
use std::time::Duration;

use pgq_testkit::TestDatabase;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

/// How long a worker process may take to start.
const STARTS_WITHIN: Duration = Duration::from_secs(30);

/// Starts one worker process of the fleet on `db` with `args`, waits until it runs, and returns
/// it (killed when dropped) with its worker id and the lines it prints from then on.
pub(crate) async fn start_worker(
    db: &TestDatabase,
    args: &[&str],
) -> (Child, String, mpsc::UnboundedReceiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fleet_worker"))
        .args(args)
        .env("DATABASE_URL", db.url())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let id = tokio::time::timeout(STARTS_WITHIN, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(rest) = line.strip_prefix("worker ") {
                return rest.split(' ').next().unwrap().to_owned();
            }
        }
        panic!("the worker exited before running");
    })
    .await
    .expect("the worker starts");
    // Keep reading its output, whether or not the caller does, so that it never blocks on a
    // full pipe.
    let (printed, output) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = printed.send(line);
        }
    });
    (child, id, output)
}
