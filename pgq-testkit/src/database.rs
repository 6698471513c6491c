//! [`TestDatabase`]: an isolated, migrated database per test.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pgq_core::{Client, JobId};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, PgConnection, PgPool};

/// The server tests use when `DATABASE_URL` is not set.
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Databases made by this process so far; part of each new name.
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A database of its own for one test, with pgq's schema applied; dropped when the value is.
///
/// The server comes from `DATABASE_URL` (any database on it; the role must be allowed to create
/// databases), or [`DEFAULT_DATABASE_URL`].
///
/// ```no_run
/// # async fn example() {
/// let db = pgq_testkit::TestDatabase::new().await;
/// let client = db.client();
/// # }
/// ```
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
    server: PgConnectOptions,
    pool: PgPool,
}

impl TestDatabase {
    /// Creates and migrates a new database. Panics with the reason if it cannot.
    pub async fn new() -> Self {
        let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into());
        let server: PgConnectOptions = url
            .parse()
            .unwrap_or_else(|err| panic!("DATABASE_URL {url:?} is not a PostgreSQL URL: {err}"));
        let server = server.disable_statement_logging();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "pgq_test_{}_{}_{nanos}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        let mut admin = PgConnection::connect_with(&server)
            .await
            .unwrap_or_else(|err| {
                panic!("cannot connect to PostgreSQL at {url:?} (set DATABASE_URL): {err}")
            });
        // The name is made here of letters, digits and underscores; DDL cannot bind it.
        sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE \"{name}\"")))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|err| panic!("cannot create test database {name}: {err}"));
        admin.close().await.ok();
        let pool = PgPoolOptions::new()
            .max_connections(10)
            .connect_with(server.clone().database(&name))
            .await
            .unwrap_or_else(|err| panic!("cannot connect to test database {name}: {err}"));
        pgq_core::migrate(&pool)
            .await
            .unwrap_or_else(|err| panic!("cannot migrate test database {name}: {err}"));
        Self { name, server, pool }
    }

    /// A pool on the test database.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A client on the test database's pool.
    pub fn client(&self) -> Client {
        Client::new(self.pool.clone())
    }

    /// Connection options for the test database, for pools of your own (separate workers).
    pub fn connect_options(&self) -> PgConnectOptions {
        self.server.clone().database(&self.name)
    }

    /// A URL of the test database, for programs the test starts (`DATABASE_URL`).
    pub fn url(&self) -> String {
        self.connect_options().to_url_lossy().to_string()
    }

    /// Moves time forward by `duration` for every unfinished job: run times and leases come
    /// that much sooner, so delayed jobs, retries after backoff and lease expiry need no sleep.
    pub async fn advance(&self, duration: Duration) {
        sqlx::query(
            "UPDATE pgq.jobs
             SET run_at = run_at - $1 * interval '1 millisecond',
                 lease_expires_at = lease_expires_at - $1 * interval '1 millisecond'
             WHERE status IN ('pending', 'claimed', 'running')",
        )
        .bind(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
        .execute(&self.pool)
        .await
        .unwrap_or_else(|err| panic!("cannot move time forward: {err}"));
    }

    /// Makes one pending job due now.
    pub async fn make_due(&self, id: JobId) {
        sqlx::query("UPDATE pgq.jobs SET run_at = now() WHERE id = $1 AND status = 'pending'")
            .bind(id.get())
            .execute(&self.pool)
            .await
            .unwrap_or_else(|err| panic!("cannot make job {id} due: {err}"));
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // Drop runs outside any async context we could borrow, so a short-lived thread with its
        // own runtime drops the database; FORCE ends connections still open in pools.
        let name = self.name.clone();
        let server = self.server.clone();
        let dropper = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async move {
                let mut admin = PgConnection::connect_with(&server).await.ok()?;
                sqlx::raw_sql(AssertSqlSafe(format!(
                    "DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"
                )))
                .execute(&mut admin)
                .await
                .ok()?;
                admin.close().await.ok()
            })
        });
        let _ = dropper.join();
    }
}
