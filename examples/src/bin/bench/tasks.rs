//! The benchmark's tasks, with no-op handlers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pgq_core::{Client, Handler, JobContext, Task, TaskError, async_trait};
use serde::{Deserialize, Serialize};

/// What the drains run.
#[derive(Serialize, Deserialize, Task)]
#[task(queue = "bench")]
pub(crate) struct Noop {
    pub(crate) n: u64,
}

#[async_trait]
impl Handler for Noop {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// What the latency phase runs: each records when its handler started.
#[derive(Serialize, Deserialize, Task)]
#[task(queue = "latency")]
pub(crate) struct Ping {
    pub(crate) seq: u64,
}

/// When each `Ping` handler started, by sequence number.
pub(crate) type Starts = Arc<Mutex<HashMap<u64, Instant>>>;

#[async_trait]
impl Handler for Ping {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let now = Instant::now();
        if let Some(starts) = ctx.state::<Starts>() {
            starts.lock().unwrap().insert(self.seq, now);
        }
        Ok(())
    }
}

/// Enqueues `count` no-op tasks, `batch` a call.
pub(crate) async fn enqueue_bulk(
    client: &Client,
    count: u64,
    batch: u64,
) -> Result<(), pgq_core::Error> {
    let mut next = 0;
    while next < count {
        let end = (next + batch).min(count);
        client.enqueue_many((next..end).map(|n| Noop { n })).await?;
        next = end;
    }
    Ok(())
}
