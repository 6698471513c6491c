#![doc = include_str!("../README.md")]

mod admin;
mod attempt;
mod attempt_trace;
mod cancellation;
mod client;
mod context;
pub mod defaults;
mod enqueue;
mod enqueued;
mod error;
mod handler;
mod history;
mod inline;
mod job;
mod job_id;
mod job_meta;
mod job_outcome;
mod kept_connection;
pub mod limits;
mod live_worker;
mod maintenance;
mod metric;
mod migrate;
mod panic_message;
mod payload;
mod periodic;
mod periodic_testing;
mod queue;
mod rate_limit;
mod registry;
mod schedule;
mod schema;
mod state;
mod stats;
mod store;
mod task;
mod task_error;
mod testing;
mod text;
mod trace_context;
mod wakeup;
mod watch;
mod watched;
mod watchers;
mod worker;
mod worker_id;

pub use admin::action::{ActionReport, SkipReason};
pub use admin::cursor::JobCursor;
pub use admin::filter::{JobFilter, JobOrder};
pub use admin::fleet::QueueInfo;
pub use admin::migration_state::MigrationState;
pub use admin::page::{JobCount, JobPage};
pub use admin::schedules::ScheduleInfo;
pub use admin::selection::JobSelection;
pub use async_trait::async_trait;
pub use cancellation::Cancellation;
pub use client::Client;
pub use context::JobContext;
pub use enqueue::EnqueueOptions;
pub use enqueued::Enqueued;
pub use error::{Error, Result};
pub use handler::Handler;
pub use history::{FINISHED_HISTORY_MINUTES, FinishedHistory, FinishedMinute};
pub use job::{AttemptError, Job, JobStatus};
pub use job_id::{JobId, ParseJobIdError};
pub use job_outcome::JobOutcome;
pub use live_worker::LiveWorker;
pub use maintenance::cleaner::Retention;
pub use migrate::{Migration, migrate, migrations};
pub use rate_limit::RateLimit;
pub use registry::{Registry, TaskRegistration};
pub use schedule::{Missed, Schedule};
pub use stats::QueueStats;
pub use task::Task;
pub use task_error::{TaskAction, TaskError};
pub use watch::JobWatch;
pub use worker::{DrainedJob, Worker, WorkerBuilder, WorkerEvent, WorkerHandle, WorkerStats};

/// `#[derive(Task)]`: implements [`Task`] and registers the type. See the README for keys.
pub use pgq_macros::Task;

/// What `#[derive(Task)]` expands to; not for use in your code.
#[doc(hidden)]
pub mod __private {
    pub use crate::__declare_schedule as declare_schedule;
    pub use crate::__register_task as register_task;
    pub use crate::handler::{HandlerProbe, RunFn, ViaHandler, ViaNoHandler};
    pub use crate::periodic::DeclaredSchedule;
    pub use crate::registry::TaskRegistration;
    pub use inventory;
}

/// What `pgq-testkit` builds on; use it through that crate.
#[doc(hidden)]
pub mod __testkit {
    pub use crate::attempt::Recording;
    pub use crate::inline::InlineRunner;
    pub use crate::periodic_testing::{
        declared_schedule_names, enqueue_due, enqueue_due_declared, next_instant,
        next_instant_declared, schedule_name,
    };
    pub use crate::testing::*;
}
