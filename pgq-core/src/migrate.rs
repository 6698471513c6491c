//! Applying pgq's schema: numbered SQL files in `migrations/`, embedded in the binary.
//!
//! pgq keeps its own bookkeeping in `pgq.migrations`; the application's `_sqlx_migrations`
//! is never touched. One transaction, under an advisory lock, applies every missing migration,
//! so concurrent callers wait for each other and then find nothing left to do.

use sqlx::{PgPool, Row};

use crate::error::{Error, Result};

/// One embedded migration file.
struct Migration {
    version: i64,
    name: &'static str,
    sql: &'static str,
}

/// Every migration, in order. A unit test checks this list against the directory.
const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_jobs.sql",
        sql: include_str!("../migrations/0001_jobs.sql"),
    },
    Migration {
        version: 2,
        name: "0002_in_place_start.sql",
        sql: include_str!("../migrations/0002_in_place_start.sql"),
    },
    Migration {
        version: 3,
        name: "0003_cheaper_guards.sql",
        sql: include_str!("../migrations/0003_cheaper_guards.sql"),
    },
    Migration {
        version: 4,
        name: "0004_typed_columns.sql",
        sql: include_str!("../migrations/0004_typed_columns.sql"),
    },
];

/// The advisory lock taken while migrating ("pgq_migr" in ASCII).
const MIGRATE_LOCK: i64 = 0x7067_715f_6d69_6772;

const BOOKKEEPING: &str = "
CREATE SCHEMA IF NOT EXISTS pgq;
CREATE TABLE IF NOT EXISTS pgq.migrations (
    version    bigint      PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);";

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
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATE_LOCK)
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(BOOKKEEPING).execute(&mut *tx).await?;
    for migration in MIGRATIONS {
        let applied =
            sqlx::query("SELECT checksum = md5($2) AS same FROM pgq.migrations WHERE version = $1")
                .bind(migration.version)
                .bind(migration.sql)
                .fetch_optional(&mut *tx)
                .await?;
        match applied {
            Some(row) if row.try_get::<bool, _>("same")? => continue,
            Some(_) => {
                return Err(Error::Migration {
                    version: migration.version,
                    name: migration.name.to_owned(),
                    message: "applied with different contents; migrations are append-only".into(),
                });
            }
            None => {}
        }
        sqlx::raw_sql(migration.sql)
            .execute(&mut *tx)
            .await
            .map_err(|err| Error::Migration {
                version: migration.version,
                name: migration.name.to_owned(),
                message: err.to_string(),
            })?;
        sqlx::query(
            "INSERT INTO pgq.migrations (version, name, checksum) VALUES ($1, $2, md5($3))",
        )
        .bind(migration.version)
        .bind(migration.name)
        .bind(migration.sql)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::MIGRATIONS;

    #[test]
    fn every_file_is_embedded_in_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        let embedded: Vec<&str> = MIGRATIONS.iter().map(|m| m.name).collect();
        assert_eq!(files, embedded);
        for (index, migration) in MIGRATIONS.iter().enumerate() {
            assert_eq!(migration.version, index as i64 + 1);
            assert!(
                migration
                    .name
                    .starts_with(&format!("{:04}_", migration.version))
            );
        }
    }
}
