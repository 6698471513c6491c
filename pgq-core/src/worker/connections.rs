//! The connections a worker opens besides the client's pool, each pool made like the client's
//! (its connect options — TLS, credentials — and its pool options — `after_connect` and the
//! other hooks, timeouts), with a size of its own and an `application_name` an operator finds in
//! `pg_stat_activity`:
//!
//! - `pgq-dispatch:<queue>`: per queue, one connection per tick the dispatcher may have in
//!   flight ([`WorkerBuilder::dispatch_connections`](crate::WorkerBuilder::dispatch_connections)),
//!   which run the tick alone and keep one plan for it (see [`dispatch_pool`]);
//! - `pgq-upkeep`: lease renewal, rescue, cleaning and releases
//!   ([`WorkerBuilder::upkeep_connections`](crate::WorkerBuilder::upkeep_connections));
//! - `pgq-listen`: the one LISTEN connection (none behind a transaction pooler).

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

/// A pool of the worker's own, and how its connections are made from the client pool's.
#[derive(Debug, Clone)]
pub(crate) struct OwnPool {
    pub(crate) pool: PgPool,
    application_name: String,
    settings: Vec<(&'static str, String)>,
    /// The client pool's options its connections are made from.
    made_from: Arc<PgConnectOptions>,
}

impl OwnPool {
    /// Makes the pool's next connections from the client pool's options, if they changed since:
    /// the credentials an application rotates there (`PgPool::set_connect_options`, a cloud IAM
    /// token) reach the worker's connections as they are replaced.
    pub(crate) fn follow(&mut self, client_pool: &PgPool) {
        let now = client_pool.connect_options();
        if !Arc::ptr_eq(&now, &self.made_from) {
            self.pool
                .set_connect_options(options(&now, &self.application_name, &self.settings));
            self.made_from = now;
        }
    }
}

/// The client pool's options, with a connection name and `settings` of its own.
fn options(
    client: &PgConnectOptions,
    application_name: &str,
    settings: &[(&'static str, String)],
) -> PgConnectOptions {
    let options = client.clone().application_name(application_name);
    // Only when there are any: sqlx sends an empty `options` otherwise, which poolers refuse.
    if settings.is_empty() {
        options
    } else {
        options.options(settings.iter().map(|(name, value)| (*name, value)))
    }
}

/// A pool like `pool`, of at most `connections`, its connections named `application_name` and
/// given `settings` at their start.
fn like(
    pool: &PgPool,
    connections: u32,
    application_name: &str,
    settings: Vec<(&'static str, String)>,
) -> OwnPool {
    let made_from = pool.connect_options();
    let own = pool
        .options()
        .clone()
        .max_connections(connections)
        .min_connections(0)
        // sqlx pings a connection before each use by default: a round trip per statement.
        .test_before_acquire(false)
        .connect_lazy_with(options(&made_from, application_name, &settings));
    OwnPool {
        pool: own,
        application_name: application_name.to_owned(),
        settings,
        made_from,
    }
}

/// Settings of every connection a worker opens for its own statements. A plan PostgreSQL caches
/// is built on the table as it was then: on an empty table, a sequential scan looks free, and so
/// does a nested loop that rereads one side of a join for every row of the other; that plan
/// stays while the table grows, until the statistics change. Every statement pgq runs on its own
/// connections finds its rows through an index condition (`id = ANY(...)`): without sequential
/// scans, none of their plans reads the whole table; without nested loops, their joins by id are
/// hash joins, linear in the jobs they touch. Without JIT: a scan left without an alternative
/// (of `pgq.workers`, a few rows) is costed as disabled, far above `jit_above_cost`, and
/// PostgreSQL would compile the statement to machine code on every call, 100–400 ms for work of
/// a tenth of a millisecond. `store::plans` checks all three. And at read committed whatever the
/// database's default: a claim skips rows other claims hold, and a keyed claim counts its keys'
/// jobs after it takes the queue's lock, both as of the latest commits; at repeatable read or
/// serializable they would read a snapshot from before, and fail or count stale jobs.
pub(crate) const BOUNDED: &[(&str, &str)] = &[
    ("enable_seqscan", "off"),
    ("enable_nestloop", "off"),
    ("jit", "off"),
    ("default_transaction_isolation", "read committed"),
];

/// What a dispatch connection adds to [`BOUNDED`]: the tick keeps one plan, built once, instead
/// of PostgreSQL planning it anew on every call, which costs as much as running it. PostgreSQL
/// builds it again when the table's statistics change.
const ONE_PLAN: (&str, &str) = ("plan_cache_mode", "force_generic_plan");

/// [`BOUNDED`], `also`, and the server's limit for each statement
/// ([`Store::server_timeout`](crate::store::Store::server_timeout)): a statement the worker gave
/// up on is cancelled by the server too, and never commits later. None behind a transaction
/// pooler, which refuses settings in a connection's startup and keeps no session state (each
/// statement's own transaction sets its limit there).
fn settings(
    pooled: bool,
    also: &[(&'static str, &'static str)],
    limit: Option<Duration>,
) -> Vec<(&'static str, String)> {
    if pooled {
        return Vec::new();
    }
    let mut settings: Vec<(&str, String)> = BOUNDED
        .iter()
        .chain(also)
        .map(|&(name, value)| (name, value.to_owned()))
        .collect();
    if let Some(limit) = limit {
        settings.push(("statement_timeout", limit.as_millis().to_string()));
    }
    settings
}

/// One queue's dispatcher connections, their statements held to `limit` by the server.
pub(crate) fn dispatch_pool(
    pool: &PgPool,
    queue: &str,
    connections: u32,
    pooled: bool,
    limit: Option<Duration>,
) -> OwnPool {
    like(
        pool,
        connections,
        &format!("pgq-dispatch:{queue}"),
        settings(pooled, &[ONE_PLAN], limit),
    )
}

/// A small pool of its own for lease renewal and maintenance, so that handlers holding every
/// connection of the client's pool cannot starve them; plain behind a transaction pooler, as
/// the dispatcher's.
pub(crate) fn upkeep_pool(
    pool: &PgPool,
    connections: u32,
    pooled: bool,
    limit: Option<Duration>,
) -> OwnPool {
    like(
        pool,
        connections,
        "pgq-upkeep",
        settings(pooled, &[], limit),
    )
}

/// One listening connection, named `application_name`: a pool of its own for each attempt to
/// listen, since a listener dropped after its connection went silent holds it for minutes.
pub(crate) fn listen_pool(pool: &PgPool, application_name: &str) -> PgPool {
    like(pool, 1, application_name, Vec::new()).pool
}
