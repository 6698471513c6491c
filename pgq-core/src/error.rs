//! The crate's error type.

use crate::job::JobStatus;
use crate::job_id::JobId;

/// A `Result` whose error is pgq's [`Error`].
///
/// ```no_run
/// # use pgq_core::{Client, JobId, Task};
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
/// async fn welcome(client: &Client, user_id: i64) -> pgq_core::Result<JobId> {
///     Ok(client.enqueue(SendWelcome { user_id }).await?.id())
/// }
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything pgq's client, registry and worker can fail with.
///
/// ```no_run
/// # use pgq_core::{Client, Error, JobId};
/// # async fn example(client: Client, id: JobId) -> pgq_core::Result<()> {
/// match client.cancel(id).await {
///     Ok(_) => println!("job {id} cancelled"),
///     Err(Error::JobState { status, .. }) => println!("too late: job {id} is {status}"),
///     Err(Error::JobNotFound(_)) => println!("no job {id}"),
///     Err(other) => return Err(other),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database refused or failed a statement, or a connection was lost. Shown with the
    /// database's message, its SQLSTATE code, detail and hint.
    #[error("database error: {}", database_message(.0))]
    Database(#[source] sqlx::Error),

    /// pgq's tables are not in the database, or not in the client's schema, or lack what this
    /// version of pgq uses: it was never migrated, the client names another database or schema
    /// ([`Client::with_schema`](crate::Client::with_schema)), or a deploy's migration has not
    /// run yet. Run [`Client::migrate`](crate::Client::migrate) or `pgq migrate`.
    #[error(
        "pgq's schema is missing from this database, or older than this pgq ({message}): run `Client::migrate` or `pgq migrate`"
    )]
    SchemaMissing {
        /// The database's message, naming what is missing.
        message: String,
    },

    /// The database did not answer one of pgq's statements in time, and the connection was
    /// closed; or the pool had no connection free for that long (every one in use, or none could
    /// be opened).
    #[error(
        "the database did not answer within {0:?} (a connection that did not answer is closed), or the pool had no connection free that long"
    )]
    Unresponsive(std::time::Duration),

    /// Applying pgq's schema failed.
    #[error("migration {version} ({name}) failed: {message}")]
    Migration {
        /// The number of the migration.
        version: i64,
        /// Its file name.
        name: String,
        /// What went wrong.
        message: String,
    },

    /// The database's schema was migrated by a newer pgq than this binary: this binary's
    /// statements may not fit it. Run the newer pgq, or restore the schema.
    #[error(
        "pgq's schema in the database is at version {database}; this binary knows up to {binary}"
    )]
    SchemaTooNew {
        /// The newest migration the database has.
        database: i64,
        /// The newest migration this binary has.
        binary: i64,
    },

    /// Two task types were registered with one task name.
    #[error("task name {name:?} is registered by two types: {first_type} and {second_type}")]
    DuplicateTaskName {
        /// The name both types use.
        name: String,
        /// One of the types.
        first_type: String,
        /// The other type.
        second_type: String,
    },

    /// A schema name was empty, too long, or held characters outside the allowed set.
    #[error("invalid schema name {name:?}: {reason}")]
    InvalidSchema {
        /// The refused name (cut to 80 characters).
        name: String,
        /// Why it was refused.
        reason: &'static str,
    },

    /// A queue name was empty, too long, or held characters outside the allowed set.
    #[error("invalid queue name {queue:?}: {reason}")]
    InvalidQueue {
        /// The refused name (cut to 80 characters).
        queue: String,
        /// Why it was refused.
        reason: &'static str,
    },

    /// An enqueue option was out of range.
    #[error("invalid {option} for task {task:?}: {reason}")]
    InvalidOption {
        /// The task being enqueued.
        task: &'static str,
        /// The option's name, as in [`EnqueueOptions`](crate::EnqueueOptions).
        option: &'static str,
        /// Why it was refused.
        reason: String,
    },

    /// No job has this id (never enqueued, or deleted by retention).
    #[error("job {0} not found")]
    JobNotFound(JobId),

    /// The job's status does not allow the action (cancelling a finished job, retrying one
    /// that has not failed).
    #[error("cannot {action} job {id}: it is {status}")]
    JobState {
        /// The job.
        id: JobId,
        /// Its status now.
        status: JobStatus,
        /// What was asked: `cancel`, `retry`, or (in tests) `make due`.
        action: &'static str,
    },

    /// A job filter or an admin action's argument was refused before anything reached the
    /// database: a page size out of range, a name outside its rules, an unbounded text search.
    #[error("invalid job filter: {0}")]
    InvalidFilter(String),

    /// Retrying the job would give its unique key a second active job.
    #[error("cannot retry job {0}: another active job holds its unique key")]
    UniqueKeyHeld(JobId),

    /// This attempt no longer holds the job: its lease ran out, and another attempt may own it.
    #[error("lease lost: attempt {attempt} of job {id} no longer holds the job")]
    LeaseLost {
        /// The job.
        id: JobId,
        /// The attempt that lost it.
        attempt: i32,
    },

    /// A worker's configuration was refused by `build()`, or the worker failed to stop.
    #[error("invalid worker: {0}")]
    InvalidWorker(String),

    /// A periodic schedule was refused by `build()`: a cron expression that does not parse, an
    /// unknown time zone, a name given twice, a backfill out of range.
    #[error("invalid schedule {schedule:?}: {reason}")]
    InvalidSchedule {
        /// The schedule's name (its task's name unless it was given one), cut to 80 characters.
        schedule: String,
        /// Why it was refused.
        reason: String,
    },

    /// A task's serialized payload exceeds the client's limit.
    #[error("payload of task {task:?} is {size} bytes; the limit is {limit} bytes")]
    PayloadTooLarge {
        /// The task being enqueued.
        task: &'static str,
        /// The size of its JSON payload.
        size: usize,
        /// The client's limit.
        limit: usize,
    },

    /// A task's payload cannot be stored as it is.
    #[error("payload of task {task:?} cannot be stored: {reason}")]
    InvalidPayload {
        /// The task being enqueued.
        task: &'static str,
        /// Why.
        reason: &'static str,
    },

    /// A task could not be serialized to JSON.
    #[error("payload of task {task:?} could not be serialized: {source}")]
    Serialize {
        /// The task being enqueued.
        task: &'static str,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
}

impl From<sqlx::Error> for Error {
    /// A statement of pgq's that names a schema, table, column, type or function the database
    /// lacks found no schema of pgq's, or an older one: every one its statements name is its
    /// own.
    fn from(err: sqlx::Error) -> Self {
        let missing = err
            .as_database_error()
            .filter(|db| names_a_missing_object(*db))
            .map(|db| db.message().to_owned());
        match missing {
            Some(message) => Error::SchemaMissing { message },
            None => Error::Database(err),
        }
    }
}

impl Error {
    /// What the failure of one of pgq's own statements (run through `Store::bound`) means:
    /// besides what [`From`] tells, rows lacking a column pgq reads (`job.*` on an older
    /// table) and a write to a column the database generates (`phase`, in schemas before
    /// migration 0004; none of pgq's columns is generated now) come from a schema older than
    /// the binary. Only there: an application's statements, whose errors its `?` converts,
    /// keep these as [`Error::Database`].
    pub(crate) fn of_own_statement(self) -> Self {
        let missing = match &self {
            Error::Database(sqlx::Error::ColumnNotFound(column)) => {
                Some(format!("the rows of a statement lack column \"{column}\""))
            }
            Error::Database(err) => err
                .as_database_error()
                .filter(|db| db.code().as_deref() == Some("428C9"))
                .map(|db| db.message().to_owned()),
            _ => None,
        };
        match missing {
            Some(message) => Error::SchemaMissing { message },
            None => self,
        }
    }
}

/// Whether the server refused one of pgq's statements for naming what the database lacks.
/// SQLSTATE 42703, 42704 and 42883 also cover unknown operators and settings, so for those the
/// routine that raised the error must be the parser's lookup of a column, a type or a
/// function. The routine is read from the error's `R` field, which the server's language
/// (`lc_messages`) leaves in English; only a server that sends none is judged by its message's
/// English start.
fn names_a_missing_object(db: &dyn sqlx::error::DatabaseError) -> bool {
    let pg = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>();
    // Raised inside a function or trigger (the error has a context): an application's trigger
    // on pgq's table reading what its own schema lacks. pgq's functions come with the tables
    // they read, so an older schema fails at the statement, naming the function.
    if pg.is_some_and(|pg| pg.r#where().is_some()) {
        return false;
    }
    let routine = pg.and_then(|pg| pg.routine());
    let raised_by = |routines: &[&str], english_start: &str| match routine {
        Some(routine) => routines.contains(&routine),
        None => db.message().starts_with(english_start),
    };
    match db.code().as_deref() {
        Some("42P01" | "3F000") => true,
        Some("42703") => raised_by(
            &[
                "errorMissingColumn",
                "checkInsertTargets",
                "transformUpdateTargetList",
                "unknown_attribute",
            ],
            "column ",
        ),
        Some("42704") => raised_by(&["typenameType"], "type "),
        Some("42883") => raised_by(
            &["ParseFuncOrColumn", "regprocedurein", "regprocin"],
            "function ",
        ),
        _ => false,
    }
}

/// A database error as an operator reads it: the message, its SQLSTATE code, and PostgreSQL's
/// detail and hint when it gave them (sqlx's own text adds the line of PostgreSQL's source
/// that raised it, which tells an operator nothing).
pub(crate) fn database_message(err: &sqlx::Error) -> String {
    let Some(db) = err.as_database_error() else {
        return err.to_string();
    };
    let mut text = db.message().to_owned();
    if let Some(code) = db.code() {
        text.push_str(&format!(" (SQLSTATE {code})"));
    }
    if let Some(pg) = db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>() {
        if let Some(detail) = pg.detail() {
            text.push_str(&format!("; {detail}"));
        }
        if let Some(hint) = pg.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
    }
    text
}

impl Error {
    /// Whether the database gave up on the statement because it met another transaction
    /// (deadlock detected, or a serialization failure): running it again may succeed.
    pub(crate) fn is_conflict(&self) -> bool {
        let Error::Database(err) = self else {
            return false;
        };
        err.as_database_error()
            .and_then(|err| err.code())
            .is_some_and(|code| code == "40P01" || code == "40001")
    }

    /// Whether the server cancelled the statement (SQLSTATE 57014): at a `statement_timeout`, or
    /// asked to. The code, not the message, which the server writes in its own language.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.has_code("57014")
    }

    /// Whether the statement was prepared on this connection before a migration changed the
    /// columns it returns: PostgreSQL refuses to run it again until it is prepared anew
    /// ("cached plan must not change result type", SQLSTATE 0A000, the only feature pgq's fixed
    /// statements can find unsupported).
    pub(crate) fn is_stale_plan(&self) -> bool {
        self.has_code("0A000")
    }

    fn has_code(&self, wanted: &str) -> bool {
        let Error::Database(err) = self else {
            return false;
        };
        err.as_database_error()
            .and_then(|err| err.code())
            .is_some_and(|code| code == wanted)
    }

    /// Whether the statement failed for want of the database, not because of what it asked: the
    /// connection broke or did not answer, no connection could be had in time, or the server is
    /// shutting down or starting. The same statement may succeed once the database is back.
    pub(crate) fn is_unreachable(&self) -> bool {
        let Error::Database(err) = self else {
            return matches!(self, Error::Unresponsive(_));
        };
        match err {
            sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
            // Connection exceptions (class 08); the server shutting down, crashed or starting;
            // too many connections.
            err => err
                .as_database_error()
                .and_then(|err| err.code())
                .is_some_and(|code| {
                    code.starts_with("08")
                        || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300")
                }),
        }
    }

    /// Whether the server refused a text for a character its encoding lacks (a `LATIN1`
    /// database given `→`): the same text in ASCII would be stored.
    pub(crate) fn is_untranslatable(&self) -> bool {
        let Error::Database(err) = self else {
            return false;
        };
        err.as_database_error()
            .and_then(|err| err.code())
            .is_some_and(|code| matches!(&*code, "22P05" | "22021"))
    }

    /// Whether the connection the error came from is no use for the next statement: it did not
    /// answer in time (its pool's check would wait as long), or it holds statements a migration
    /// made stale. Such a connection is closed rather than given back to its pool.
    pub(crate) fn spoils_connection(&self) -> bool {
        matches!(self, Error::Unresponsive(_)) || self.is_stale_plan()
    }

    pub(crate) fn invalid_queue(queue: &str, reason: &'static str) -> Self {
        Error::InvalidQueue {
            queue: queue.chars().take(80).collect(),
            reason,
        }
    }
}
