//! The connections a worker opens besides the client's pool: its dispatchers' and its upkeep's,
//! each a small pool of its own, made from the client pool's connect options.

use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::worker::dispatcher::TICKS_IN_FLIGHT;

/// Connections of the upkeep pool: renewal, rescue and cleaning.
const UPKEEP_CONNECTIONS: u32 = 2;

/// A small pool of its own for lease renewal and maintenance, so that handlers holding every
/// connection of the main pool cannot starve them.
pub(crate) fn upkeep_pool(pool: &PgPool) -> PgPool {
    PgPoolOptions::new()
        .max_connections(UPKEEP_CONNECTIONS)
        .test_before_acquire(false)
        .connect_lazy_with(pool.connect_options().as_ref().clone())
}

/// The dispatchers' own connections, one per tick a queue may have in flight. Ticks set their
/// own commit mode (see `store::tick`).
pub(crate) fn dispatch_pool(pool: &PgPool, queues: usize) -> PgPool {
    let options = pool.connect_options().as_ref().clone();
    PgPoolOptions::new()
        .max_connections(u32::try_from(queues * TICKS_IN_FLIGHT).unwrap_or(u32::MAX))
        .test_before_acquire(false)
        .connect_lazy_with(options)
}
