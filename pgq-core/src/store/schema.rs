//! pgq's schema: the numbered SQL files in `migrations/`, embedded in the binary, and the
//! statements that apply them.
//!
//! pgq keeps its own bookkeeping in `pgq.migrations`; the application's `_sqlx_migrations` is
//! never touched. One transaction, under a transaction-scoped advisory lock, applies every
//! missing migration, so concurrent callers wait for each other and then find nothing to do.
//!
//! [`scripts`] gives the same migrations as plain SQL for teams that apply DDL with tools of
//! their own: each script does what `migrate` does for its version, bookkeeping included, so
//! that `migrate` finds it applied.

use std::collections::HashMap;
use std::fmt::Write as _;

use chrono::{DateTime, Utc};
use md5::{Digest, Md5};
use sqlx::AssertSqlSafe;

use crate::error::{Error, Result, database_message};
use crate::store::moment::Moment;
use crate::store::{self, Store, run, sql};

/// One embedded migration file.
pub(crate) struct Migration {
    pub(crate) version: i64,
    pub(crate) name: &'static str,
    pub(crate) sql: &'static str,
}

/// Every migration, in order. A unit test checks this list against the directory.
pub(crate) const MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        name: "0001_jobs.sql",
        sql: include_str!("../../migrations/0001_jobs.sql"),
    },
    Migration {
        version: 2,
        name: "0002_in_place_start.sql",
        sql: include_str!("../../migrations/0002_in_place_start.sql"),
    },
    Migration {
        version: 3,
        name: "0003_cheaper_guards.sql",
        sql: include_str!("../../migrations/0003_cheaper_guards.sql"),
    },
    Migration {
        version: 4,
        name: "0004_typed_columns.sql",
        sql: include_str!("../../migrations/0004_typed_columns.sql"),
    },
    Migration {
        version: 5,
        name: "0005_hardening.sql",
        sql: include_str!("../../migrations/0005_hardening.sql"),
    },
    Migration {
        version: 6,
        name: "0006_meta_workers_queues.sql",
        sql: include_str!("../../migrations/0006_meta_workers_queues.sql"),
    },
    Migration {
        version: 7,
        name: "0007_fewer_writes.sql",
        sql: include_str!("../../migrations/0007_fewer_writes.sql"),
    },
    Migration {
        version: 8,
        name: "0008_worker_heartbeats.sql",
        sql: include_str!("../../migrations/0008_worker_heartbeats.sql"),
    },
    Migration {
        version: 9,
        name: "0009_scheduling.sql",
        sql: include_str!("../../migrations/0009_scheduling.sql"),
    },
    Migration {
        version: 10,
        name: "0010_queue_seats.sql",
        sql: include_str!("../../migrations/0010_queue_seats.sql"),
    },
    Migration {
        version: 11,
        name: "0011_lighter_inserts.sql",
        sql: include_str!("../../migrations/0011_lighter_inserts.sql"),
    },
    Migration {
        version: 12,
        name: "0012_stall_proof_keys_and_buckets.sql",
        sql: include_str!("../../migrations/0012_stall_proof_keys_and_buckets.sql"),
    },
    Migration {
        version: 13,
        name: "0013_own_key_limits.sql",
        sql: include_str!("../../migrations/0013_own_key_limits.sql"),
    },
    Migration {
        version: 14,
        name: "0014_unused_tokens_back.sql",
        sql: include_str!("../../migrations/0014_unused_tokens_back.sql"),
    },
];

/// The transaction-scoped advisory lock taken while migrating ("pgq_migr" in ASCII).
const MIGRATE_LOCK: i64 = 0x7067_715f_6d69_6772;

const LOCK: &str = "SELECT pg_advisory_xact_lock($1)";

/// Whether the bookkeeping table exists in schema `$1`: read before any DDL, so that an
/// up-to-date schema needs no privilege beyond reading it. Read from the catalog, not looked up
/// by name: a session remembers names it did not find until it takes a lock on a table, and a
/// migration that waited on the advisory lock takes none before this, so a lookup would miss
/// what the process it waited for created.
const HAS_BOOKKEEPING: &str = "SELECT EXISTS (SELECT FROM pg_catalog.pg_class AS c
    JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
    WHERE n.nspname = $1 AND c.relname = 'migrations')";

const APPLIED: &str = "SELECT version, checksum FROM pgq.migrations ORDER BY version";

/// Whether every role may create objects in the schema (`CREATE` granted to `PUBLIC`, as on
/// `public` before PostgreSQL 15): there, any role's function or operator with a closer match
/// than `pg_catalog`'s would run inside pgq's functions, as the role that calls them.
const OPEN_TO_ALL: &str = "SELECT EXISTS (SELECT FROM pg_catalog.pg_namespace
    WHERE nspname = $1 AND pg_catalog.has_schema_privilege('public', oid, 'CREATE'))";

const APPLIED_AT: &str = "SELECT version, applied_at FROM pgq.migrations ORDER BY version";

const BOOKKEEPING: &str = "
CREATE TABLE IF NOT EXISTS pgq.migrations (
    version    bigint      PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)";

const RECORD: &str = "INSERT INTO pgq.migrations (version, name, checksum) VALUES ($1, $2, $3)";

/// The md5 of a migration's text, as the bookkeeping records it (`md5()` in SQL), with its
/// lines ended by `\n`: a checkout that ends them with `\r\n` builds a binary that agrees.
fn checksum(sql: &str) -> String {
    Md5::digest(sql.replace("\r\n", "\n").as_bytes())
        .iter()
        .fold(String::with_capacity(32), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// `sql` with every character outside ASCII written `?`. They are all in comments (a test makes
/// sure), and a database whose encoding lacks one (LATIN1 has no `→`) would refuse the whole
/// text. The checksum is of the migration as written.
fn ascii(sql: &str) -> String {
    sql.chars()
        .map(|c| if c.is_ascii() { c } else { '?' })
        .collect()
}

/// Creates `schema` unless it exists. `CREATE SCHEMA IF NOT EXISTS` needs the CREATE privilege
/// on the database even when the schema exists: a role that migrates a schema made for it in
/// advance (`CREATE SCHEMA … AUTHORIZATION`) has none. The name is checked when the client is
/// made (lowercase letters, digits and `_`), so it needs no quoting inside the literal.
fn create_schema(schema: &str) -> String {
    format!(
        "DO $create$ BEGIN\n\
         IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace\n\
                        WHERE nspname OPERATOR(pg_catalog.=) '{schema}') THEN\n\
         CREATE SCHEMA \"{schema}\";\n\
         END IF;\n\
         END $create$;"
    )
}

/// Every migration as a script for `schema`: `(version, name, sql)`. A script creates the schema
/// and the bookkeeping table if need be, runs the migration under the search path `migrate`
/// uses (functions keep it), and records itself; run each once, in order, in a transaction.
pub(crate) fn scripts(schema: &str) -> Vec<(i64, &'static str, String)> {
    MIGRATIONS
        .iter()
        .map(|migration| {
            let mut sql = format!(
                "-- pgq migration {name} for schema \"{schema}\". Apply the scripts in order, each \
                 once;\n-- pgq's migrate() finds them applied, and waits for one in progress.\n\
                 SELECT pg_catalog.pg_advisory_xact_lock({lock});\n\
                 {create}\n\
                 SET search_path = pg_catalog, \"{schema}\";\n",
                lock = store::lock_key(schema, MIGRATE_LOCK),
                create = create_schema(schema),
                name = migration.name,
            );
            sql.push_str(sql::in_schema(BOOKKEEPING, schema).trim());
            sql.push_str(";\n\n");
            sql.push_str(ascii(&sql::in_schema(migration.sql, schema)).trim_end());
            let _ = write!(
                sql,
                "\n\nINSERT INTO \"{schema}\".migrations (version, name, checksum)\n\
                 VALUES ({}, '{}', '{}');\nRESET search_path;\n",
                migration.version,
                migration.name,
                checksum(migration.sql),
            );
            (migration.version, migration.name, sql)
        })
        .collect()
}

/// Each applied migration's version and when it was applied; none when pgq's schema (or its
/// bookkeeping) does not exist.
pub(crate) async fn applied(store: &Store) -> Result<Vec<(i64, DateTime<Utc>)>> {
    run!(store, |conn| async {
        let exists: bool = sqlx::query_scalar(store.sql(HAS_BOOKKEEPING))
            .persistent(store.prepared())
            .bind(store.schema().name())
            .fetch_one(&mut *conn)
            .await?;
        if !exists {
            return Ok(Vec::new());
        }
        let applied: Vec<(i64, Moment)> = sqlx::query_as(store.sql(APPLIED_AT))
            .persistent(store.prepared())
            .fetch_all(&mut *conn)
            .await?;
        Ok(applied.into_iter().map(|(v, at)| (v, at.into())).collect())
    })
}

/// Applies every migration the database lacks, in one transaction. DDL runs with a search path
/// of `pg_catalog` and the schema alone, so that what it creates refers to nothing of anyone
/// else's (migrations name their own objects with the schema), and functions keep that path.
pub(crate) async fn migrate(store: &Store) -> Result<()> {
    let schema = store.schema().name();
    // Read committed whatever the database's default: a transaction that waited for the lock
    // must read what the one before it committed, and a repeatable read or serializable one
    // would read from a snapshot taken before its wait. And without the role's or database's
    // time limits (an `ALTER ROLE .. SET statement_timeout` for a pooler): the DDL takes as long
    // as it needs, and a process waits for another's migration however long it runs.
    let mut tx = store
        .pool()
        .begin_with(
            "BEGIN ISOLATION LEVEL READ COMMITTED; \
             SET LOCAL statement_timeout = 0; SET LOCAL lock_timeout = 0",
        )
        .await?;
    sqlx::query(store.sql(LOCK))
        .persistent(store.prepared())
        .bind(store.lock_key(MIGRATE_LOCK))
        .execute(&mut *tx)
        .await?;
    let exists: bool = sqlx::query_scalar(store.sql(HAS_BOOKKEEPING))
        .persistent(store.prepared())
        .bind(schema)
        .fetch_one(&mut *tx)
        .await?;
    let mut applied: HashMap<i64, String> = HashMap::new();
    if exists {
        let rows: Vec<(i64, String)> = sqlx::query_as(store.sql(APPLIED))
            .persistent(store.prepared())
            .fetch_all(&mut *tx)
            .await?;
        applied.extend(rows);
    }
    let newest_known = MIGRATIONS.last().map_or(0, |m| m.version);
    if let Some(&newest) = applied.keys().max()
        && newest > newest_known
    {
        return Err(Error::SchemaTooNew {
            database: newest,
            binary: newest_known,
        });
    }
    let mut missing = Vec::new();
    for migration in MIGRATIONS {
        match applied.get(&migration.version) {
            Some(recorded) => {
                if *recorded != checksum(migration.sql) {
                    return Err(Error::Migration {
                        version: migration.version,
                        name: migration.name.to_owned(),
                        message: "applied with different contents; migrations are append-only"
                            .into(),
                    });
                }
            }
            None => missing.push(migration),
        }
    }
    let open_to_all: bool = sqlx::query_scalar(store.sql(OPEN_TO_ALL))
        .persistent(store.prepared())
        .bind(schema)
        .fetch_one(&mut *tx)
        .await?;
    if missing.is_empty() {
        if open_to_all {
            tracing::warn!(
                schema,
                "every role may create objects in pgq's schema; REVOKE CREATE ON SCHEMA .. FROM PUBLIC"
            );
        }
        // Up to date: nothing was written, and no DDL privilege was needed.
        tx.commit().await?;
        return Ok(());
    }
    if open_to_all {
        let first = missing[0];
        return Err(Error::Migration {
            version: first.version,
            name: first.name.to_owned(),
            message: format!(
                "every role may create objects in schema \"{schema}\" (CREATE is granted to \
                 PUBLIC), so any role's functions could run inside pgq's; run `REVOKE CREATE ON \
                 SCHEMA \"{schema}\" FROM PUBLIC`, or give pgq a schema of its own"
            ),
        });
    }
    // The name was checked when the client was made; DDL cannot bind it.
    let prepare = format!(
        "{} SET LOCAL search_path = pg_catalog, \"{schema}\";",
        create_schema(schema)
    );
    sqlx::raw_sql(AssertSqlSafe(prepare))
        .execute(&mut *tx)
        .await?;
    sqlx::raw_sql(AssertSqlSafe(sql::in_schema(BOOKKEEPING, schema)))
        .execute(&mut *tx)
        .await?;
    for migration in missing {
        sqlx::raw_sql(AssertSqlSafe(ascii(&sql::in_schema(migration.sql, schema))))
            .execute(&mut *tx)
            .await
            .map_err(|err| Error::Migration {
                version: migration.version,
                name: migration.name.to_owned(),
                message: database_message(&err),
            })?;
        sqlx::query(store.sql(RECORD))
            .persistent(store.prepared())
            .bind(migration.version)
            .bind(migration.name)
            .bind(checksum(migration.sql))
            .execute(&mut *tx)
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{MIGRATIONS, checksum, scripts};

    #[test]
    fn characters_outside_ascii_are_only_in_comments() {
        for migration in MIGRATIONS {
            for line in migration.sql.lines() {
                if !line.is_ascii() {
                    assert!(
                        line.trim_start().starts_with("--"),
                        "{}: {line}",
                        migration.name
                    );
                }
            }
        }
    }

    #[test]
    fn every_statement_renders() {
        crate::store::sql::assert_renders(&[
            super::HAS_BOOKKEEPING,
            super::APPLIED_AT,
            super::OPEN_TO_ALL,
        ]);
    }

    #[test]
    fn checksums_are_md5_in_hex() {
        assert_eq!(checksum(""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(checksum("abc"), "900150983cd24fb0d6963f7d28e17f72");
        assert_eq!(checksum("a;\r\nb;\r\n"), checksum("a;\nb;\n"));
    }

    #[test]
    fn each_script_records_itself_in_its_schema() {
        let scripts = scripts("billing_jobs");
        assert_eq!(scripts.len(), MIGRATIONS.len());
        for ((version, name, sql), migration) in scripts.iter().zip(MIGRATIONS) {
            assert_eq!((*version, *name), (migration.version, migration.name));
            assert!(
                sql.contains(
                    "nspname OPERATOR(pg_catalog.=) 'billing_jobs') THEN\n\
                     CREATE SCHEMA \"billing_jobs\";"
                ),
                "{sql}"
            );
            assert!(sql.contains(&format!("'{}'", checksum(migration.sql))));
            assert!(!sql.contains("pgq."), "every name is in the schema: {name}");
        }
    }

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
