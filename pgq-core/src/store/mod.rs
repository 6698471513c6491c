//! The store: every SQL statement pgq runs lives below this module, with values always bound,
//! rendered for the client's schema with every operator and function qualified (see
//! [`sql`]). [`Store`] is how pgq reaches a database for statements of its own: each within a
//! time limit, so that a connection that stopped answering (a dead network, a failover) is
//! noticed and replaced instead of waited on forever; a deadlock or serialization failure that
//! pgq's own statement meets is retried here, never handed to the caller.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use sqlx::pool::PoolConnection;
use sqlx::{PgPool, Postgres};

use crate::error::{Error, Result};
use crate::schema::Schema;

pub(crate) mod attempt;
pub(crate) mod bulk;
pub(crate) mod control;
pub(crate) mod enqueue;
pub(crate) mod history;
pub(crate) mod job;
pub(crate) mod leaders;
pub(crate) mod lease;
pub(crate) mod maintenance;
pub(crate) mod moment;
#[cfg(test)]
pub(crate) mod plans;
pub(crate) mod progress;
pub(crate) mod queues;
pub(crate) mod schedules;
pub(crate) mod schema;
pub(crate) mod search;
pub(crate) mod seats;
pub(crate) mod sql;
pub(crate) mod testing;
pub(crate) mod tick;
pub(crate) mod walk;
pub(crate) mod workers;

/// How often pgq runs one of its own statements again after a deadlock or serialization
/// failure. Each needs another transaction to take the same rows in another order at that
/// moment; pgq's statements lock rows in one order, so the second try is all it takes.
pub(crate) const CONFLICT_RETRIES: u32 = 5;

/// How many of a pool's connections one call clears of statements prepared before a migration
/// changed what they return (see [`run`]) before it gives up. Each failure clears one.
pub(crate) const STALE_PLAN_RETRIES: u32 = 64;

/// Runs statements on a connection the caller holds, within the store's time limit:
/// `on!(store, connection, |conn| statement(conn, ..))`. Behind a transaction pooler that cannot
/// keep prepared statements, the work runs inside a transaction of its own, so that every message
/// of a statement reaches one server connection, and the server holds it to
/// [`Store::server_timeout`].
macro_rules! on {
    ($store:expr, $connection:expr, |$conn:ident| $work:expr) => {{
        let store: &$crate::store::Store = &$store;
        let connection: &mut ::sqlx::PgConnection = $connection;
        if store.pinned() {
            store
                .bound(async {
                    let mut tx =
                        ::sqlx::Connection::begin_with(&mut *connection, store.begin()).await?;
                    let done = {
                        let $conn: &mut ::sqlx::PgConnection = &mut tx;
                        $work.await
                    };
                    if done.is_ok() {
                        tx.commit().await?;
                    }
                    done
                })
                .await
        } else {
            let $conn: &mut ::sqlx::PgConnection = connection;
            store.bound($work).await
        }
    }};
}
pub(crate) use on;

/// Runs statements on a connection of a [`Store`]'s pool, within its time limit:
/// `run!(store, |conn| statement(conn, ..))` for any future that uses `conn: &mut PgConnection`.
/// A connection that did not answer in time is closed: returned to the pool, it would be checked
/// with a round trip that waits as long as the network stays silent. A deadlock or
/// serialization failure runs the work again, on a fresh transaction. A statement the connection
/// prepared before a migration changed the columns it returns (a process that kept running
/// through an upgrade) fails on that connection until it is prepared again: the connection
/// forgets its prepared statements and the work runs again.
macro_rules! run {
    ($store:expr, |$conn:ident| $work:expr) => {{
        let store: &$crate::store::Store = &$store;
        let mut tries = 0;
        let mut stale = 0;
        loop {
            tries += 1;
            let result = match store.acquire().await {
                Ok(mut pooled) => {
                    let result = $crate::store::on!(store, &mut pooled, |$conn| $work);
                    match &result {
                        Err($crate::error::Error::Unresponsive(_)) => pooled.close_on_drop(),
                        Err(err) if err.is_stale_plan() => {
                            let cleared = store
                                .bound(async {
                                    Ok(::sqlx::Connection::clear_cached_statements(&mut *pooled)
                                        .await?)
                                })
                                .await;
                            if cleared.is_err() {
                                pooled.close_on_drop();
                            }
                        }
                        _ => {}
                    }
                    result
                }
                Err(err) => Err(err),
            };
            match result {
                Err(err) if err.is_conflict() && tries < $crate::store::CONFLICT_RETRIES => {
                    $crate::store::conflict_pause(tries).await;
                }
                Err(err) if err.is_stale_plan() && stale < $crate::store::STALE_PLAN_RETRIES => {
                    stale += 1;
                    tries -= 1;
                }
                result => break result,
            }
        }
    }};
}
pub(crate) use run;

/// An advisory lock key of schema `name`: `base` for `pgq`, mixed with the name for any other,
/// so that instances in other schemas do not wait for each other.
pub(crate) fn lock_key(name: &str, base: i64) -> i64 {
    if name == sql::TEMPLATE_SCHEMA {
        return base;
    }
    // FNV-1a: stable across builds and platforms, unlike the standard library's hasher.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    base ^ hash.cast_signed()
}

/// A short, growing, jittered pause before trying a conflicted statement again.
pub(crate) async fn conflict_pause(tries: u32) {
    let jitter = u64::from(std::process::id() ^ tries.wrapping_mul(2_654_435_761)) % 5;
    tokio::time::sleep(Duration::from_millis(u64::from(tries) * 5 + jitter)).await;
}

/// The channels pgq notifies on. Their names carry the schema, so that instances in other
/// schemas of the same database do not hear them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Channel {
    /// A job is due in the queue named by the payload.
    Insert,
    /// The job whose id is the payload was asked to cancel.
    Cancel,
    /// The job whose id is the payload reported progress.
    Progress,
    /// The queue named by the payload was paused or resumed.
    Queue,
}

/// A pool, the schema pgq lives in there, and how long pgq waits for one of its own
/// statements on it.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pool: PgPool,
    timeout: Duration,
    schema: Schema,
    /// Whether statements are prepared once per connection and kept (named), or sent unnamed
    /// each time, as a transaction pooler without protocol-level support for prepared
    /// statements needs.
    prepared: bool,
    /// Whether each statement runs in a transaction of its own: behind such a pooler, the
    /// messages of one unnamed statement must reach one server connection.
    pinned: bool,
    /// Whether the pool is a worker's own, whose connections start with pgq's server limit.
    own: bool,
    /// Whether the database stores any text as given (UTF-8), once asked: shared by the
    /// store's clones.
    holds_any_text: Arc<OnceLock<bool>>,
}

impl Store {
    pub(crate) fn new(pool: PgPool, timeout: Duration, schema: Schema) -> Self {
        Self {
            pool,
            timeout,
            schema,
            prepared: true,
            pinned: false,
            own: false,
            holds_any_text: Arc::default(),
        }
    }

    /// Whether the database was found to store any text as given; `None` until asked.
    pub(crate) fn holds_any_text(&self) -> Option<bool> {
        self.holds_any_text.get().copied()
    }

    /// What the database's encoding was found to be: see [`Self::holds_any_text`].
    pub(crate) fn found_holds_any_text(&self, holds: bool) {
        let _ = self.holds_any_text.set(holds);
    }

    /// The store behind a transaction pooler: statements unnamed, each in a transaction of its
    /// own — or, with a pooler that keeps prepared statements (`prepared`), as usual.
    pub(crate) fn behind_pooler(self, prepared: bool) -> Self {
        Self {
            prepared,
            pinned: !prepared,
            ..self
        }
    }

    /// Whether each statement runs in a transaction of its own.
    pub(crate) fn pinned(&self) -> bool {
        self.pinned
    }

    /// The same store with another time limit.
    /// Zero: no limit, as PostgreSQL's `statement_timeout = 0`.
    pub(crate) fn with_timeout(self, timeout: Duration) -> Self {
        let timeout = if timeout.is_zero() {
            Duration::MAX
        } else {
            timeout
        };
        Self { timeout, ..self }
    }

    /// The same store in another schema.
    pub(crate) fn with_schema(self, schema: Schema) -> Self {
        Self { schema, ..self }
    }

    /// Whether statements are kept prepared on each connection.
    pub(crate) fn prepared(&self) -> bool {
        self.prepared
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The limit the server itself holds pgq's statements to, where pgq can set one: a tenth
    /// shorter than the time the client waits, so that a statement the client gives up on (a
    /// tick waiting for a lock) is cancelled by the server and never commits after it. `None`
    /// without a limit. PostgreSQL takes at most `i32::MAX` milliseconds (about 24.8 days) and
    /// refuses the connection or the `SET` beyond: a longer limit is held to that.
    pub(crate) fn server_timeout(&self) -> Option<Duration> {
        const LONGEST: Duration = Duration::from_millis(i32::MAX as u64);
        (self.timeout != Duration::MAX)
            .then(|| (self.timeout - self.timeout / 10).clamp(Duration::from_millis(1), LONGEST))
    }

    /// What starts a statement's own transaction behind a transaction pooler: `BEGIN` at read
    /// committed (as the worker's own connections run, see `worker::connections`), with the
    /// server's limit for it (in the same round trip).
    pub(crate) fn begin(&self) -> ::sqlx::AssertSqlSafe<String> {
        const BEGIN: &str = "BEGIN ISOLATION LEVEL READ COMMITTED";
        ::sqlx::AssertSqlSafe(match self.server_timeout() {
            Some(limit) => format!(
                "{BEGIN}; SET LOCAL statement_timeout = {}",
                limit.as_millis()
            ),
            None => BEGIN.to_owned(),
        })
    }

    pub(crate) fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The same schema and limits on another pool.
    pub(crate) fn on(&self, pool: PgPool) -> Self {
        Self {
            pool,
            own: true,
            ..self.clone()
        }
    }

    /// `template` rendered for this store's schema.
    pub(crate) fn sql(&self, template: &'static str) -> &'static str {
        sql::statement(self.schema.as_arc(), template)
    }

    /// A statement composed at run time from this layer's fixed fragments (a search), rendered
    /// for this store's schema. Not kept: each composition is rendered where it is used.
    pub(crate) fn composed(&self, text: &str) -> String {
        sql::render(text, self.schema.name())
    }

    /// The name of a notification channel in this store's schema.
    pub(crate) fn channel(&self, channel: Channel) -> String {
        let suffix = match channel {
            Channel::Insert => "insert",
            Channel::Cancel => "cancel",
            Channel::Progress => "progress",
            Channel::Queue => "queue",
        };
        format!("{}_{suffix}", self.schema.name())
    }

    /// An advisory lock key of this store's schema: `base` for `pgq`, mixed with the name for
    /// any other, so that instances in other schemas do not wait for each other.
    pub(crate) fn lock_key(&self, base: i64) -> i64 {
        lock_key(self.schema.name(), base)
    }

    /// A connection of the pool, waited for within the time limit.
    pub(crate) async fn acquire(&self) -> Result<PoolConnection<Postgres>> {
        self.bound(async { Ok(self.pool.acquire().await?) }).await
    }

    /// Waits at most the time limit for `work`, on a connection the caller holds; after an
    /// [`Error::Unresponsive`] the caller closes that connection.
    /// A statement the server cancelled at pgq's limit ([`Store::server_timeout`], set on a
    /// worker's own connections and in each transaction behind a pooler) is reported as the
    /// client's own would be; one cancelled at a limit of the application's (its role's or its
    /// pool's `statement_timeout`) stays the database's error.
    /// Which limit it was is told by the time taken, not by the server's message, which it
    /// writes in its own language: one cancelled after pgq's limit had passed was pgq's.
    pub(crate) async fn bound<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        let limit = self.server_timeout().filter(|_| self.own || self.pinned);
        let started = tokio::time::Instant::now();
        match tokio::time::timeout(self.timeout, work).await {
            Ok(Err(err))
                if err.is_cancelled() && limit.is_some_and(|limit| started.elapsed() >= limit) =>
            {
                Err(Error::Unresponsive(self.timeout))
            }
            Ok(Err(err)) => Err(err.of_own_statement()),
            Ok(result) => result,
            Err(_) => Err(Error::Unresponsive(self.timeout)),
        }
    }
}
