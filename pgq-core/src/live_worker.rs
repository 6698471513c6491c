//! A worker process as the database knows it: registered at start, heartbeating, removed at a
//! clean shutdown.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

/// A live worker process, as [`Client::workers`](crate::Client::workers) lists it.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// for worker in client.workers().await? {
///     println!("{} on {} (pid {}): {} held, queues {:?}", worker.id, worker.host, worker.pid, worker.held, worker.queues);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LiveWorker {
    /// The worker's id ([`WorkerBuilder::worker_id`](crate::WorkerBuilder::worker_id)), which
    /// its held jobs carry.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// Each queue it serves, with its concurrency.
    pub queues: BTreeMap<String, u32>,
    /// When it registered.
    pub started_at: DateTime<Utc>,
    /// Its last heartbeat.
    pub heartbeat_at: DateTime<Utc>,
    /// How many jobs it held at its last heartbeat.
    pub held: u32,
}
