#![doc = include_str!("../README.md")]

mod attempt;
mod client;
mod context;
mod enqueue;
mod error;
mod handler;
mod job;
mod job_id;
mod kept_connection;
mod maintenance;
mod migrate;
mod queue;
mod registry;
mod state;
mod stats;
mod store;
mod task;
mod task_error;
mod testing;
mod wakeup;
mod watch;
mod worker;

pub use async_trait::async_trait;
pub use attempt::{MAX_STAGE_BYTES, PROGRESS_THROTTLE};
pub use client::{Client, DEFAULT_MAX_CONNECTIONS};
pub use context::JobContext;
pub use enqueue::{
    DEFAULT_MAX_PAYLOAD_BYTES, EnqueueOptions, Enqueued, MAX_DELAY, MAX_UNIQUE_KEY_BYTES,
};
pub use error::{Error, Result};
pub use handler::Handler;
pub use job::{AttemptError, Job, JobStatus};
pub use job_id::{JobId, ParseJobIdError};
pub use maintenance::cleaner::{
    DEFAULT_CLEAN_INTERVAL, DEFAULT_RETAIN_COMPLETED, DEFAULT_RETAIN_FAILED, Retention,
};
pub use maintenance::rescuer::DEFAULT_RESCUE_INTERVAL;
pub use migrate::migrate;
pub use queue::MAX_QUEUE_LEN;
pub use registry::{Registry, TaskRegistration};
pub use stats::QueueStats;
pub use store::control::Cancellation;
pub use task::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY, DEFAULT_QUEUE, MAX_LEASE, MAX_MAX_ATTEMPTS,
    MAX_PRIORITY, MIN_PRIORITY, Task,
};
pub use task_error::{MAX_ERROR_BYTES, TaskAction, TaskError};
pub use wakeup::WAKEUP_WINDOW;
pub use watch::{JobWatch, WATCH_POLL_INTERVAL};
pub use worker::{
    DEFAULT_BATCH_SIZE, DEFAULT_LEASE, DEFAULT_POLL_INTERVAL, DEFAULT_SHUTDOWN_GRACE, DRAIN_LIMIT,
    DrainedJob, JobOutcome, Worker, WorkerBuilder, WorkerEvent, WorkerHandle, WorkerStats,
};

/// `#[derive(Task)]`: implements [`Task`] and registers the type. See the README for keys.
pub use pgq_macros::Task;

#[doc(hidden)]
pub mod __private {
    pub use crate::__register_task as register_task;
    pub use crate::attempt::Recording;
    pub use crate::handler::{HandlerProbe, RunFn, ViaHandler, ViaNoHandler};
    pub use crate::registry::TaskRegistration;
    pub use crate::testing::{CancelSwitch, TestAttempt};
    pub use inventory;
}
