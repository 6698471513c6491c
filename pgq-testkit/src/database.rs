//! [`TestDatabase`]: an isolated, migrated database per test.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pgq_core::{__testkit, Client, JobId};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{ConnectOptions, PgPool};

use crate::sweep;

/// The server tests use when `DATABASE_URL` is not set.
///
/// ```
/// let server = std::env::var("DATABASE_URL")
///     .unwrap_or_else(|_| pgq_testkit::DEFAULT_DATABASE_URL.to_owned());
/// assert!(server.starts_with("postgres"));
/// ```
pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// Databases made by this process so far; part of each new name.
static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A database of its own for one test, with pgq's schema applied; dropped when the value is.
/// The first in each process also drops the test databases of test processes that were killed
/// before they could drop theirs (see `docs/testing.md`).
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
pub struct TestDatabase {
    name: String,
    server: PgConnectOptions,
    pool: PgPool,
}

/// The database's name and the server's address, never the password: a test's debug output
/// ends up in CI logs.
impl fmt::Debug for TestDatabase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestDatabase")
            .field("name", &self.name)
            .field("host", &self.server.get_host())
            .field("port", &self.server.get_port())
            .field("user", &self.server.get_username())
            .finish_non_exhaustive()
    }
}

impl TestDatabase {
    /// Creates and migrates a new database. Panics with the reason if it cannot, after
    /// dropping the database when it was made but could not be connected to or migrated.
    ///
    /// ```no_run
    /// #[tokio::test]
    /// async fn enqueue_works() {
    ///     let db = pgq_testkit::TestDatabase::new().await;
    ///     // ... use db.client() and db.pool(); the database is dropped with `db`.
    /// }
    /// ```
    pub async fn new() -> Self {
        let url = std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into());
        let server: PgConnectOptions = url
            .parse()
            .unwrap_or_else(|err| panic!("DATABASE_URL is not a PostgreSQL URL: {err}"));
        let server = server.disable_statement_logging();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        sweep::sweep_once(&server).await;
        let name = format!(
            "{}{}_{}_{nanos}",
            sweep::PREFIX,
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        __testkit::create_database(&server, &name)
            .await
            .unwrap_or_else(|err| {
                let at = shown(&server);
                panic!("cannot create test database {name} as {at} (set DATABASE_URL): {err}")
            });
        match ready(&server, &name).await {
            Ok(pool) => Self { name, server, pool },
            // No `TestDatabase` exists to drop the database when the panic unwinds.
            Err(reason) => match __testkit::drop_database(&server, &name).await {
                Ok(()) => panic!("{reason}"),
                Err(err) => panic!("{reason} (and it could not be dropped: {err})"),
            },
        }
    }

    /// A pool on the test database.
    ///
    /// ```no_run
    /// # async fn example(db: pgq_testkit::TestDatabase) {
    /// let pending: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = 'pending'")
    ///     .fetch_one(db.pool())
    ///     .await
    ///     .unwrap();
    /// # }
    /// ```
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// A client on the test database's pool.
    ///
    /// ```no_run
    /// # use pgq_core::Task;
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendWelcome { user_id: i64 }
    /// # async fn example(db: pgq_testkit::TestDatabase) {
    /// let id = db.client().enqueue(SendWelcome { user_id: 7 }).await.unwrap().id();
    /// # }
    /// ```
    pub fn client(&self) -> Client {
        Client::new(self.pool.clone())
    }

    /// Connection options for the test database, for pools of your own (separate workers).
    ///
    /// ```no_run
    /// # async fn example(db: pgq_testkit::TestDatabase) {
    /// // A second worker process, as it were: its own pool on the same database, built as
    /// // pgq wants it (see `Client::new`).
    /// let pool = sqlx::postgres::PgPoolOptions::new()
    ///     .test_before_acquire(false)
    ///     .connect_with(db.connect_options())
    ///     .await
    ///     .unwrap();
    /// let other = pgq_core::Client::new(pool);
    /// # }
    /// ```
    pub fn connect_options(&self) -> PgConnectOptions {
        self.server.clone().database(&self.name)
    }

    /// A URL of the test database, for programs the test starts (`DATABASE_URL`).
    ///
    /// ```no_run
    /// # fn example(db: pgq_testkit::TestDatabase) {
    /// let status = std::process::Command::new("target/debug/my-worker")
    ///     .env("DATABASE_URL", db.url())
    ///     .status()
    ///     .unwrap();
    /// # }
    /// ```
    pub fn url(&self) -> String {
        self.connect_options().to_url_lossy().to_string()
    }

    /// Moves time forward by `duration` for every unfinished job: run times and leases come
    /// that much sooner, so delayed jobs, retries after backoff and lease expiry need no sleep.
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, EnqueueOptions, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendReminder { user_id: i64 }
    /// # #[async_trait] impl Handler for SendReminder {
    /// #     async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> { Ok(()) }
    /// # }
    /// # async fn example(db: pgq_testkit::TestDatabase) {
    /// let in_an_hour = EnqueueOptions::default().delay(Duration::from_secs(3600));
    /// db.client().enqueue_with(SendReminder { user_id: 7 }, in_an_hour).await.unwrap();
    /// assert!(pgq_testkit::drain(&db.client(), "default").await.is_empty());
    /// db.advance(Duration::from_secs(3600)).await;
    /// assert_eq!(pgq_testkit::drain(&db.client(), "default").await.len(), 1);
    /// # }
    /// ```
    pub async fn advance(&self, duration: Duration) {
        __testkit::advance(&self.client(), duration)
            .await
            .unwrap_or_else(|err| panic!("cannot move time forward: {err}"));
    }

    /// Makes one pending job due now, leaving every other job's time alone, and wakes idle
    /// workers of its queue. Panics when no job has this id, or when the job is not pending (a
    /// test that makes a running or finished job due is mistaken about it).
    ///
    /// ```no_run
    /// # use std::time::Duration;
    /// # use pgq_core::{async_trait, EnqueueOptions, Handler, JobContext, Task, TaskError};
    /// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendReminder { user_id: i64 }
    /// # #[async_trait] impl Handler for SendReminder {
    /// #     async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> { Ok(()) }
    /// # }
    /// # async fn example(db: pgq_testkit::TestDatabase) {
    /// let tomorrow = EnqueueOptions::default().delay(Duration::from_secs(86_400));
    /// let id = db.client().enqueue_with(SendReminder { user_id: 7 }, tomorrow).await.unwrap().id();
    /// db.make_due(id).await;
    /// assert_eq!(pgq_testkit::drain(&db.client(), "default").await[0].id, id);
    /// # }
    /// ```
    pub async fn make_due(&self, id: JobId) {
        __testkit::make_due(&self.client(), id)
            .await
            .unwrap_or_else(|err| panic!("cannot make job {id} due: {err}"));
    }

    /// The database's name: `pgq_test_<pid>_<n>_<nanos>`, unique per test.
    ///
    /// ```no_run
    /// # async fn example() {
    /// let db = pgq_testkit::TestDatabase::new().await;
    /// println!("this test runs in database {}", db.name());
    /// # }
    /// ```
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
            runtime
                .block_on(__testkit::drop_database(&server, &name))
                .err()
        });
        // Not a panic (this may run while a test unwinds), but never silent: a role that cannot
        // drop databases leaves one behind for every test.
        if let Ok(Some(err)) = dropper.join() {
            use std::io::Write as _;
            let _ = writeln!(
                std::io::stderr().lock(),
                "pgq-testkit: cannot drop test database {}: {err}",
                self.name
            );
        }
    }
}

/// A pool on the new database `name`, migrated; or why not.
async fn ready(server: &PgConnectOptions, name: &str) -> Result<PgPool, String> {
    // As `Client::connect` builds it: no ping before each use, so tests run pgq's statements
    // as production does.
    let pool = PgPoolOptions::new()
        .max_connections(10)
        .test_before_acquire(false)
        .connect_with(server.clone().database(name))
        .await
        .map_err(|err| {
            format!(
                "cannot connect to test database {name}: {}",
                pgq_core::Error::from(err)
            )
        })?;
    if let Err(err) = pgq_core::migrate(&pool).await {
        pool.close().await;
        return Err(format!("cannot migrate test database {name}: {err}"));
    }
    Ok(pool)
}

/// The server and role a panic names: never the password, as panics land in CI logs.
fn shown(server: &PgConnectOptions) -> String {
    format!(
        "{}@{}:{}",
        server.get_username(),
        server.get_host(),
        server.get_port()
    )
}

#[cfg(test)]
mod shown_tests {
    #[test]
    fn a_server_is_named_without_its_password() {
        let server = "postgres://app:s3cret@db.internal:6543/app?password=other"
            .parse()
            .unwrap();
        let shown = super::shown(&server);
        assert_eq!(shown, "app@db.internal:6543");
        assert!(!shown.contains("s3cret") && !shown.contains("other"));
    }
}
