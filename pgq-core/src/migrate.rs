//! Applying pgq's schema, or handing its SQL to a migration tool of the team's; see
//! `store::schema` for the migrations and how they are applied.

use sqlx::PgPool;

use crate::defaults;
use crate::error::Result;
use crate::schema::Schema;
use crate::store::{self, Store};

/// Creates or updates pgq's schema (`pgq`) in the pool's database.
///
/// Safe to call on every start, and from several processes at once, whatever the database's
/// default isolation level. The schema is created only when it is missing: a role that owns a
/// schema made for it in advance needs no CREATE privilege on the database.
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

/// One of pgq's migrations as a SQL script, for teams that apply DDL with tools of their own
/// (sqlx migrate, Flyway, Atlas, dbmate): see [`migrations`] and
/// [`Client::migrations`](crate::Client::migrations).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Migration {
    /// Its number, from 1; apply them in this order.
    pub version: i64,
    /// The name of its file in `migrations/`: `0001_jobs.sql`, ….
    pub name: &'static str,
    /// The script: the migration, in its schema, with the bookkeeping that lets
    /// [`migrate`] find it applied.
    pub sql: String,
}

/// pgq's migrations as scripts for schema `pgq`, in order, each to run once in a transaction.
/// Each creates the schema if need be, runs its migration under the search path pgq's own
/// functions keep (`pg_catalog, pgq`), and records itself in `pgq.migrations`, so that
/// [`migrate`] and [`Client::migrate`](crate::Client::migrate) find it applied and do nothing
/// more; a later pgq's new migrations are new scripts. For another schema, see
/// [`Client::migrations`](crate::Client::migrations).
///
/// ```no_run
/// // Vendor pgq's schema into a dbmate directory: versions after the application's own (here
/// // timestamps of a day of its choosing), and dbmate's `up` marker first.
/// for migration in pgq_core::migrations() {
///     let file = format!(
///         "db/migrations/20261201{:06}_pgq_{}",
///         migration.version, migration.name
///     );
///     std::fs::write(file, format!("-- migrate:up\n{}", migration.sql)).unwrap();
/// }
/// ```
pub fn migrations() -> Vec<Migration> {
    scripts(&Schema::default())
}

pub(crate) fn scripts(schema: &Schema) -> Vec<Migration> {
    store::schema::scripts(schema.name())
        .into_iter()
        .map(|(version, name, sql)| Migration { version, name, sql })
        .collect()
}
