//! Applying pgq's schema; see `store::schema` for the migrations and how they are applied.

use sqlx::PgPool;

use crate::defaults;
use crate::error::Result;
use crate::schema::Schema;
use crate::store::{self, Store};

/// Creates or updates pgq's schema (`pgq`) in the pool's database.
///
/// Safe to call on every start, and from several processes at once.
///
/// ```no_run
/// # async fn example(pool: sqlx::PgPool) -> pgq_core::Result<()> {
/// pgq_core::migrate(&pool).await?;
/// # Ok(()) }
/// ```
pub async fn migrate(pool: &PgPool) -> Result<()> {
    let store = Store::new(pool.clone(), defaults::STATEMENT_TIMEOUT, Schema::default());
    store::schema::migrate(&store).await
}
