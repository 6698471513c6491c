//! The command line: global options and one subcommand per concern.

use clap::{Args, Parser, Subcommand};

use crate::filter_args::FilterArgs;

/// Operate pgq: apply its schema, see queues and workers, find jobs and act on them.
#[derive(Debug, Parser)]
#[command(name = "pgq", version, about)]
pub(crate) struct Cli {
    #[command(flatten)]
    pub(crate) global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command takes.
#[derive(Debug, Args)]
pub(crate) struct Global {
    /// The database, as a PostgreSQL URL.
    #[arg(long, env = "DATABASE_URL", global = true, hide_env_values = true)]
    pub(crate) database_url: Option<String>,
    /// The schema pgq lives in.
    #[arg(long, env = "PGQ_SCHEMA", global = true, default_value = "pgq")]
    pub(crate) schema: String,
    /// JSON on standard output instead of tables, for scripts.
    #[arg(long, global = true)]
    pub(crate) json: bool,
}

// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Create or update pgq's schema; or show which migrations the database has.
    Migrate(MigrateArgs),
    /// Per-queue counts, lag and rates.
    Stats,
    /// Find, show and act on jobs.
    #[command(subcommand)]
    Jobs(JobsCommand),
    /// List queues; pause or resume one.
    #[command(subcommand)]
    Queues(QueuesCommand),
    /// The live worker processes.
    Workers,
}

#[derive(Debug, Args)]
pub(crate) struct MigrateArgs {
    /// Show each migration and whether the database has it; change nothing.
    #[arg(long, conflicts_with = "print_sql")]
    pub(crate) status: bool,
    /// Print the migrations as SQL scripts for another migration tool; connect to nothing.
    #[arg(long)]
    pub(crate) print_sql: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum JobsCommand {
    /// Jobs matching the filters, newest first.
    List(ListArgs),
    /// One job: payload, errors, progress and timing.
    Show {
        /// The job's id.
        id: pgq_core::JobId,
    },
    /// Run failed or cancelled jobs again.
    Retry(RetryArgs),
    /// Cancel pending jobs; ask running ones to stop.
    Cancel(ActionArgs),
    /// Delete finished jobs (any job with --force).
    Delete(DeleteArgs),
    /// Make a pending job due now.
    RunNow {
        /// The job's id.
        id: pgq_core::JobId,
    },
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    #[command(flatten)]
    pub(crate) filter: FilterArgs,
    /// At most this many jobs.
    #[arg(long, default_value_t = 50)]
    pub(crate) limit: usize,
    /// Start after this cursor, as a previous listing printed it.
    #[arg(long)]
    pub(crate) after: Option<pgq_core::JobCursor>,
    /// newest, oldest, or run-at (pending jobs, soonest first).
    #[arg(long, default_value = "newest", value_parser = parse_order)]
    pub(crate) order: pgq_core::JobOrder,
}

/// The jobs an action is for, and how it asks.
#[derive(Debug, Args)]
pub(crate) struct ActionArgs {
    /// Job ids; or none, and filters.
    pub(crate) ids: Vec<pgq_core::JobId>,
    #[command(flatten)]
    pub(crate) filter: FilterArgs,
    /// Show what would change; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Do not ask before acting on many jobs.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
}

#[derive(Debug, Args)]
pub(crate) struct RetryArgs {
    #[command(flatten)]
    pub(crate) action: ActionArgs,
    /// Give each job at least this many attempts left.
    #[arg(long, default_value_t = 1)]
    pub(crate) attempts: u32,
}

#[derive(Debug, Args)]
pub(crate) struct DeleteArgs {
    #[command(flatten)]
    pub(crate) action: ActionArgs,
    /// Delete jobs that have not finished too.
    #[arg(long)]
    pub(crate) force: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum QueuesCommand {
    /// Every queue with jobs, workers or a pause.
    List,
    /// Stop every worker claiming from a queue, until resumed.
    Pause {
        /// The queue.
        name: String,
    },
    /// Let workers claim from a paused queue again.
    Resume {
        /// The queue.
        name: String,
    },
}

fn parse_order(text: &str) -> Result<pgq_core::JobOrder, String> {
    match text {
        "newest" => Ok(pgq_core::JobOrder::Newest),
        "oldest" => Ok(pgq_core::JobOrder::Oldest),
        "run-at" => Ok(pgq_core::JobOrder::RunAt),
        other => Err(format!("unknown order {other:?}: newest, oldest or run-at")),
    }
}
