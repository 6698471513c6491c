//! The connections a worker opens besides the client's pool, each pool made like the client's
//! (its connect options — TLS, credentials — and its pool options — `after_connect` and the
//! other hooks, timeouts), with a size of its own and an `application_name` an operator finds in
//! `pg_stat_activity`:
//!
//! - `pgq-dispatch:<queue>`: per queue, one connection per tick the dispatcher may have in
//!   flight ([`WorkerBuilder::dispatch_connections`](crate::WorkerBuilder::dispatch_connections));
//! - `pgq-upkeep`: lease renewal, rescue, cleaning and releases
//!   ([`WorkerBuilder::upkeep_connections`](crate::WorkerBuilder::upkeep_connections));
//! - `pgq-listen`: the one LISTEN connection (none behind a transaction pooler).

use sqlx::PgPool;

/// A pool like `pool`, of at most `connections`, its connections named `application_name`.
fn like(pool: &PgPool, connections: u32, application_name: &str) -> PgPool {
    let options = pool
        .connect_options()
        .as_ref()
        .clone()
        .application_name(application_name);
    pool.options()
        .clone()
        .max_connections(connections)
        .min_connections(0)
        // sqlx pings a connection before each use by default: a round trip per statement.
        .test_before_acquire(false)
        .connect_lazy_with(options)
}

/// One queue's dispatcher connections.
pub(crate) fn dispatch_pool(pool: &PgPool, queue: &str, connections: u32) -> PgPool {
    like(pool, connections, &format!("pgq-dispatch:{queue}"))
}

/// A small pool of its own for lease renewal and maintenance, so that handlers holding every
/// connection of the client's pool cannot starve them.
pub(crate) fn upkeep_pool(pool: &PgPool, connections: u32) -> PgPool {
    like(pool, connections, "pgq-upkeep")
}

/// The listener's one connection.
pub(crate) fn listen_pool(pool: &PgPool) -> PgPool {
    like(pool, 1, "pgq-listen")
}
