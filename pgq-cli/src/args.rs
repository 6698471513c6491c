//! The command line: global options and one subcommand per concern.

use clap::{Args, Parser, Subcommand};

use crate::filter_args::FilterArgs;

/// Operate pgq: apply its schema, see queues, workers and schedules, find jobs and act on them.
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
    /// The URL names a transaction pooler (PgBouncer): each statement unnamed, in a
    /// transaction of its own, and no LISTEN (the dashboard polls).
    #[arg(
        long,
        env = "PGQ_BEHIND_POOLER",
        global = true,
        action = clap::ArgAction::SetTrue,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub(crate) behind_pooler: bool,
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
    /// The periodic schedules: cron, time zone, missed-instant policy, last and next run, and
    /// the worker that leads them.
    Schedules,
    /// Serve the web dashboard (localhost by default).
    Web(WebArgs),
}

/// `pgq web`: the dashboard, served on its own.
#[derive(Debug, Args)]
pub(crate) struct WebArgs {
    /// The address to listen on. Anything but a loopback address needs --token.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(crate) bind: std::net::SocketAddr,
    /// The access token every request must carry (a login form asks for it once).
    #[arg(long, env = "PGQ_WEB_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Show everything, change nothing: no retry, cancel, delete, run now, pause or resume.
    #[arg(long)]
    pub(crate) read_only: bool,
    /// Never show job payloads.
    #[arg(long, conflicts_with = "mask")]
    pub(crate) hide_payloads: bool,
    /// Show payloads with this field's values masked, at any depth (repeatable).
    #[arg(long, value_name = "FIELD")]
    pub(crate) mask: Vec<String>,
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
    /// Give each job at least this many attempts left (1 to 1000).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
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
    /// Every queue with jobs, workers, a pause, a limit or a rate limit.
    List,
    /// Stop every worker claiming from a queue, until resumed.
    Pause {
        /// The queue.
        #[arg(value_parser = parse_queue)]
        name: String,
    },
    /// Let workers claim from a paused queue again.
    Resume {
        /// The queue.
        #[arg(value_parser = parse_queue)]
        name: String,
    },
    /// Run at most N jobs of a queue at once across all workers; `none` lifts the limit.
    Limit {
        /// The queue.
        #[arg(value_parser = parse_queue)]
        name: String,
        /// The most jobs claimed or running at once (1 or more), or `none`.
        #[arg(value_parser = parse_limit)]
        limit: QueueLimit,
    },
    /// Start at most N jobs of a queue per period across all workers (`20/s`, `100/m`,
    /// `5/500ms`); `none` lifts the rate limit.
    Rate {
        /// The queue.
        #[arg(value_parser = parse_queue)]
        name: String,
        /// N/s, N/m, N/h or N/<duration>, or `none`.
        #[arg(value_parser = parse_rate)]
        rate: QueueRate,
    },
}

/// A queue name, checked as every call that takes one checks it, before anything is touched.
fn parse_queue(text: &str) -> Result<String, String> {
    match pgq_core::JobFilter::new().queue(text).validate() {
        Err(pgq_core::Error::InvalidFilter(reason)) => Err(reason),
        _ => Ok(text.to_owned()),
    }
}

/// A queue's rate limit as given on the command line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueRate(pub(crate) Option<pgq_core::RateLimit>);

fn parse_rate(text: &str) -> Result<QueueRate, String> {
    if text == "none" {
        return Ok(QueueRate(None));
    }
    text.parse().map(|rate| QueueRate(Some(rate)))
}

/// A queue's concurrency limit as given on the command line.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueueLimit(pub(crate) Option<u32>);

fn parse_limit(text: &str) -> Result<QueueLimit, String> {
    if text == "none" {
        return Ok(QueueLimit(None));
    }
    match text.parse::<u32>() {
        Ok(limit) if (1..=i32::MAX as u32).contains(&limit) => Ok(QueueLimit(Some(limit))),
        _ => Err(format!(
            "{text:?} is not a limit: a whole number from 1 to {}, or `none`",
            i32::MAX
        )),
    }
}

fn parse_order(text: &str) -> Result<pgq_core::JobOrder, String> {
    match text {
        "newest" => Ok(pgq_core::JobOrder::Newest),
        "oldest" => Ok(pgq_core::JobOrder::Oldest),
        "run-at" => Ok(pgq_core::JobOrder::RunAt),
        other => Err(format!("unknown order {other:?}: newest, oldest or run-at")),
    }
}
