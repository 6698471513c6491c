//! What the dashboard tests share: the dashboard served on a local port, the tasks its workers
//! run, and waiting for a condition with a limit.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use pgq_core::{
    Client, Handler, JobContext, JobId, JobStatus, Task, TaskError, Worker, WorkerHandle,
    async_trait,
};
use pgq_web::DashboardConfig;
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

/// How long anything a test waits for may take.
pub(crate) const LIMIT: Duration = Duration::from_secs(30);

/// The dashboard, served on a free local port until the test ends.
pub(crate) struct Served {
    pub(crate) url: String,
}

/// Serves `pgq_web::router(client, config)` on `127.0.0.1`, nested under `prefix` if it is not
/// empty.
pub(crate) async fn serve(client: Client, config: DashboardConfig, prefix: &str) -> Served {
    let dashboard = pgq_web::router(client, config.mount_prefix(prefix));
    let app = if prefix.is_empty() {
        dashboard
    } else {
        axum::Router::new().nest(prefix, dashboard)
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Served {
        url: format!("http://{addr}{prefix}"),
    }
}

/// Polls `condition` until it holds; fails naming `what` after [`LIMIT`].
pub(crate) async fn eventually<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + LIMIT;
    while !condition().await {
        assert!(tokio::time::Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The job's status now.
/// The queues paused now, by name.
pub(crate) async fn paused_queues(client: &Client) -> Vec<String> {
    client
        .queues()
        .await
        .unwrap()
        .into_iter()
        .filter(|q| q.paused_at.is_some())
        .map(|q| q.name)
        .collect()
}

pub(crate) async fn status(client: &Client, id: JobId) -> JobStatus {
    client
        .job(id)
        .await
        .unwrap()
        .expect("the job exists")
        .status
}

/// Waits until the job is in `wanted`.
pub(crate) async fn wait_for_status(client: &Client, id: JobId, wanted: JobStatus) {
    eventually(&format!("job {id} is {wanted}"), || async {
        status(client, id).await == wanted
    })
    .await;
}

/// A delivery whose first attempt fails on purpose, with a readable error; later attempts
/// succeed.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "mail", max_attempts = 1)]
pub(crate) struct Deliver {
    pub(crate) to: String,
}

/// The error a first delivery attempt fails with.
pub(crate) const DELIVERY_ERROR: &str = "smtp: connection reset by mx.example.net";

#[async_trait]
impl Handler for Deliver {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        if ctx.attempt() == 1 {
            return Err(TaskError::fail(DELIVERY_ERROR));
        }
        Ok(())
    }
}

/// A job that reports progress, then waits for the test to let it finish.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "media")]
pub(crate) struct Resize {
    pub(crate) image: u32,
}

/// Lets running [`Resize`] jobs finish.
#[derive(Debug, Default)]
pub(crate) struct Gate(pub(crate) Notify);

#[async_trait]
impl Handler for Resize {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(40, "resizing").await;
        let gate = ctx.state::<Arc<Gate>>().expect("the test gives a gate");
        gate.0.notified().await;
        ctx.progress(100, "stored").await;
        Ok(())
    }
}

/// A job that does nothing.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "pings")]
pub(crate) struct Ping {
    pub(crate) n: u32,
}

#[async_trait]
impl Handler for Ping {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// A worker for `queues`, holding `gate` for [`Resize`] jobs.
pub(crate) fn worker(client: &Client, queues: &[&str], gate: Arc<Gate>) -> WorkerHandle {
    let mut builder = Worker::builder(client.clone()).state(gate);
    for queue in queues {
        builder = builder.queue(*queue, 4);
    }
    builder.build().unwrap().start()
}
