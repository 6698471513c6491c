//! [`MigrationState`]: which of pgq's migrations a database has.

use chrono::{DateTime, Utc};

use crate::client::Client;
use crate::error::Result;
use crate::store;

/// One of pgq's migrations, and whether (and when) the database has it, as
/// [`Client::migration_states`] reports it.
///
/// ```no_run
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// for state in client.migration_states().await? {
///     match state.applied_at {
///         Some(at) => println!("{} applied {at}", state.name),
///         None => println!("{} missing", state.name),
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MigrationState {
    /// Its number, from 1.
    pub version: i64,
    /// The name of its file in `migrations/`.
    pub name: &'static str,
    /// When it was applied, or `None` while the database lacks it.
    pub applied_at: Option<DateTime<Utc>>,
}

impl Client {
    /// Every migration this pgq knows, in order, with when the database got it. A database
    /// without pgq's schema has none; [`migrate`](Self::migrate) applies the missing ones. A
    /// database migrated by a newer pgq is [`Error::SchemaTooNew`](crate::Error::SchemaTooNew),
    /// as for `migrate`: the list would not show what it has.
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let missing = client.migration_states().await?.iter().filter(|m| m.applied_at.is_none()).count();
    /// println!("{missing} migrations to apply");
    /// # Ok(()) }
    /// ```
    pub async fn migration_states(&self) -> Result<Vec<MigrationState>> {
        let applied = store::schema::applied(self.store()).await?;
        let known = self.migrations().last().map_or(0, |m| m.version);
        if let Some(newest) = applied.iter().map(|(version, _)| *version).max()
            && newest > known
        {
            return Err(crate::Error::SchemaTooNew {
                database: newest,
                binary: known,
            });
        }
        Ok(self
            .migrations()
            .into_iter()
            .map(|migration| MigrationState {
                version: migration.version,
                name: migration.name,
                applied_at: applied
                    .iter()
                    .find(|(version, _)| *version == migration.version)
                    .map(|(_, at)| *at),
            })
            .collect())
    }
}
