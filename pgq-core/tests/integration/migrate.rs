use std::time::Duration;

use pgq_core::{Client, Error, Handler, JobContext, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use sqlx::ConnectOptions;
use sqlx::Row;

use crate::support;

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "unmigrated")]
struct BeforeMigrate;

#[async_trait]
impl Handler for BeforeMigrate {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[tokio::test]
async fn migrating_twice_changes_nothing() {
    let db = TestDatabase::new().await;
    pgq_core::migrate(db.pool()).await.unwrap();
    db.client().migrate().await.unwrap();
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.migrations")
        .fetch_one(db.pool())
        .await
        .unwrap();
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations"))
        .unwrap()
        .filter(|entry| entry.as_ref().unwrap().path().extension() == Some("sql".as_ref()))
        .count();
    assert_eq!(applied, files as i64, "one row per migration file");
}

#[tokio::test]
async fn concurrent_migrations_from_separate_pools_both_succeed() {
    let db = unmigrated_database().await;
    let mut runs = Vec::new();
    for _ in 0..4 {
        let pool = sqlx::PgPool::connect_with(db.connect_options())
            .await
            .unwrap();
        runs.push(tokio::spawn(async move { pgq_core::migrate(&pool).await }));
    }
    for run in runs {
        run.await.unwrap().unwrap();
    }
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_tables WHERE schemaname = 'pgq' AND tablename = 'jobs'",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    assert_eq!(tables, 1);
}

/// A host that waited for another's migration reads what it committed, also where every
/// transaction is serializable by default (its snapshot would otherwise predate the wait).
#[tokio::test]
async fn concurrent_migrations_succeed_whatever_the_default_isolation() {
    for level in ["repeatable read", "serializable"] {
        let db = unmigrated_database().await;
        let alter = format!(
            "ALTER DATABASE \"{}\" SET default_transaction_isolation = '{level}'",
            db.name()
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(alter))
            .execute(db.pool())
            .await
            .unwrap();
        // New connections, which start with the database's default, all made before any
        // migration starts, so that the others wait for the first one's lock.
        let mut pools = Vec::new();
        for _ in 0..4 {
            let pool = sqlx::PgPool::connect_with(db.connect_options())
                .await
                .unwrap();
            pools.push(pool);
        }
        let runs: Vec<_> = pools
            .into_iter()
            .map(|pool| tokio::spawn(async move { pgq_core::migrate(&pool).await }))
            .collect();
        for run in runs {
            run.await
                .unwrap()
                .unwrap_or_else(|err| panic!("at {level}: {err}"));
        }
        let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.migrations")
            .fetch_one(db.pool())
            .await
            .unwrap();
        assert_eq!(applied, pgq_core::migrations().len() as i64, "at {level}");
    }
}

/// A role given a schema made for it in advance migrates it without the CREATE privilege on
/// the database, which `CREATE SCHEMA IF NOT EXISTS` asks for even when the schema exists; so
/// do the scripts for a migration tool.
#[tokio::test]
async fn a_role_owning_its_schema_migrates_without_create_on_the_database() {
    for with_scripts in [false, true] {
        let db = unmigrated_database().await;
        let role = format!("{}_migrator", db.name());
        let setup = format!(
            "CREATE ROLE \"{role}\" LOGIN PASSWORD '{role}';
             CREATE SCHEMA pgq AUTHORIZATION \"{role}\";"
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(setup))
            .execute(db.pool())
            .await
            .unwrap();
        let pool = sqlx::PgPool::connect_with(db.connect_options().username(&role).password(&role))
            .await
            .unwrap();
        if with_scripts {
            let mut conn = pool.acquire().await.unwrap();
            for migration in pgq_core::migrations() {
                sqlx::raw_sql(sqlx::AssertSqlSafe(migration.sql))
                    .execute(&mut *conn)
                    .await
                    .unwrap_or_else(|err| panic!("{}: {err}", migration.name));
            }
        }
        pgq_core::migrate(&pool).await.unwrap();
        let client = Client::new(pool.clone());
        client.enqueue(BeforeMigrate).await.unwrap();
        pool.close().await;
        let teardown = format!("DROP OWNED BY \"{role}\"; DROP ROLE \"{role}\"");
        sqlx::raw_sql(sqlx::AssertSqlSafe(teardown))
            .execute(db.pool())
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_applications_sqlx_migrations_are_not_touched() {
    let db = TestDatabase::new().await;
    let app_table: Option<String> =
        sqlx::query_scalar("SELECT to_regclass('public._sqlx_migrations')::text")
            .fetch_one(db.pool())
            .await
            .unwrap();
    assert_eq!(app_table, None);
    sqlx::raw_sql("CREATE TABLE public._sqlx_migrations (version bigint PRIMARY KEY); INSERT INTO public._sqlx_migrations VALUES (7)")
        .execute(db.pool())
        .await
        .unwrap();
    pgq_core::migrate(db.pool()).await.unwrap();
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM public._sqlx_migrations")
        .fetch_all(db.pool())
        .await
        .unwrap();
    assert_eq!(versions, vec![7]);
}

#[tokio::test]
async fn a_changed_migration_is_refused() {
    let db = TestDatabase::new().await;
    sqlx::query("UPDATE pgq.migrations SET checksum = 'edited' WHERE version = 1")
        .execute(db.pool())
        .await
        .unwrap();
    let err = pgq_core::migrate(db.pool()).await.unwrap_err();
    assert!(
        matches!(err, pgq_core::Error::Migration { version: 1, .. }),
        "{err}"
    );
}

#[tokio::test]
async fn the_jobs_table_has_every_column_and_index() {
    let db = TestDatabase::new().await;
    let columns: Vec<String> = sqlx::query_scalar(
        "SELECT column_name::text FROM information_schema.columns
         WHERE table_schema = 'pgq' AND table_name = 'jobs' ORDER BY column_name",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    let mut expected = vec![
        "id",
        "task",
        "queue",
        "priority",
        "status",
        "payload",
        "run_at",
        "attempts",
        "max_attempts",
        "unique_key",
        "last_error",
        "errors",
        "progress",
        "current_stage",
        "events_count",
        "worker_id",
        "claimed_at",
        "lease_expires_at",
        "cancel_requested_at",
        "created_at",
        "started_at",
        "completed_at",
        "updated_at",
        "phase",
        "meta",
        "concurrency_key",
        "concurrency_limit",
    ];
    expected.sort();
    assert_eq!(columns, expected);

    let indexes = sqlx::query(
        "SELECT indexname::text AS name, indexdef FROM pg_indexes WHERE schemaname = 'pgq' AND tablename = 'jobs'",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    let def = |name: &str| -> String {
        indexes
            .iter()
            .find(|row| row.get::<String, _>("name") == name)
            .map(|row| row.get("indexdef"))
            .unwrap_or_else(|| panic!("index {name} missing"))
    };
    assert!(def("jobs_claim_idx").contains("WHERE (phase = 0)"));
    assert!(def("jobs_unique_key_idx").starts_with("CREATE UNIQUE INDEX"));
    assert!(def("jobs_lease_idx").contains("lease_expires_at"));
    assert!(
        def("jobs_concurrency_key_idx")
            .contains("WHERE ((phase = 1) AND (concurrency_key IS NOT NULL))")
    );
}

#[tokio::test]
async fn the_status_check_refuses_unknown_states() {
    let db = TestDatabase::new().await;
    let err = sqlx::query(
        "INSERT INTO pgq.jobs (task, queue, payload, status) VALUES ('t', 'default', '{}', 'done')",
    )
    .execute(db.pool())
    .await
    .unwrap_err();
    let code = err
        .as_database_error()
        .unwrap()
        .code()
        .unwrap()
        .into_owned();
    assert_eq!(code, "23514", "{err}");
}

/// The SQLSTATE of a statement that must fail.
async fn refused(db: &TestDatabase, sql: &str) -> String {
    let err = sqlx::query(sqlx::AssertSqlSafe(sql))
        .execute(db.pool())
        .await
        .unwrap_err();
    err.as_database_error()
        .unwrap()
        .code()
        .unwrap()
        .into_owned()
}

#[tokio::test]
async fn column_bounds_are_enforced_on_insert_and_on_update() {
    let db = TestDatabase::new().await;
    for sql in [
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('t', 'no spaces', '{}')",
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('t', repeat('q', 65), '{}')",
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('', 'default', '{}')",
        "INSERT INTO pgq.jobs (task, queue, payload, priority) VALUES ('t', 'default', '{}', 1001)",
        "INSERT INTO pgq.jobs (task, queue, payload, unique_key) VALUES ('t', 'default', '{}', '')",
        "INSERT INTO pgq.jobs (task, queue, payload, errors) VALUES ('t', 'default', '{}', '{}')",
    ] {
        assert_eq!(refused(&db, sql).await, "23514", "{sql}");
    }
    sqlx::query("INSERT INTO pgq.jobs (task, queue, payload) VALUES ('t', 'a-1.b:c_D', '{}')")
        .execute(db.pool())
        .await
        .unwrap();
    for sql in [
        "UPDATE pgq.jobs SET priority = -1",
        "UPDATE pgq.jobs SET queue = 'quote''s'",
        "UPDATE pgq.jobs SET max_attempts = 0",
        "UPDATE pgq.jobs SET current_stage = repeat('s', 1025)",
        "UPDATE pgq.jobs SET events_count = -1",
    ] {
        assert_eq!(refused(&db, sql).await, "23514", "{sql}");
    }
}

/// A database migrated before 0004, with jobs in every phase, upgrades in place.
#[tokio::test]
async fn jobs_keep_their_phase_through_the_upgrade_to_typed_columns() {
    let db = unmigrated_database().await;
    let earlier = [
        (
            1,
            "0001_jobs.sql",
            include_str!("../../migrations/0001_jobs.sql"),
        ),
        (
            2,
            "0002_in_place_start.sql",
            include_str!("../../migrations/0002_in_place_start.sql"),
        ),
        (
            3,
            "0003_cheaper_guards.sql",
            include_str!("../../migrations/0003_cheaper_guards.sql"),
        ),
    ];
    sqlx::raw_sql(
        "CREATE SCHEMA pgq;
         CREATE TABLE pgq.migrations (version bigint PRIMARY KEY, name text NOT NULL,
             checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now());",
    )
    .execute(db.pool())
    .await
    .unwrap();
    for (version, name, sql) in earlier {
        sqlx::raw_sql(sql).execute(db.pool()).await.unwrap();
        sqlx::query(
            "INSERT INTO pgq.migrations (version, name, checksum) VALUES ($1, $2, md5($3))",
        )
        .bind(version as i64)
        .bind(name)
        .bind(sql)
        .execute(db.pool())
        .await
        .unwrap();
    }
    sqlx::raw_sql(
        "INSERT INTO pgq.jobs (task, queue, payload) SELECT 't', 'q', '{}' FROM generate_series(1, 4);
         UPDATE pgq.jobs SET status = 'claimed', worker_id = 'w', claimed_at = now(),
             lease_expires_at = now() + interval '1 minute' WHERE id > 1;
         UPDATE pgq.jobs SET status = 'running' WHERE id > 2;
         UPDATE pgq.jobs SET status = 'completed' WHERE id > 3;",
    )
    .execute(db.pool())
    .await
    .unwrap();

    pgq_core::migrate(db.pool()).await.unwrap();
    let phases: Vec<(String, i16)> =
        sqlx::query_as("SELECT status::text, phase FROM pgq.jobs ORDER BY id")
            .fetch_all(db.pool())
            .await
            .unwrap();
    let expected = [
        ("pending", 0),
        ("claimed", 1),
        ("running", 1),
        ("completed", 2),
    ];
    assert_eq!(
        phases,
        expected.map(|(s, p)| (s.to_owned(), p)).to_vec(),
        "phases after the upgrade"
    );
    // The guards hold on the upgraded table: a completed job stays completed.
    let refused = sqlx::query("UPDATE pgq.jobs SET status = 'pending', phase = 0 WHERE id = 4")
        .execute(db.pool())
        .await;
    assert!(refused.is_err(), "a completed job moved back to pending");
}

/// A test database without pgq's schema, as a database is before its first migration.
async fn unmigrated_database() -> TestDatabase {
    let db = TestDatabase::new().await;
    sqlx::raw_sql("DROP SCHEMA pgq CASCADE")
        .execute(db.pool())
        .await
        .unwrap();
    db
}

/// Applies pgq's scripts as a migration tool does: each in a transaction of its own, on a
/// connection that keeps the tool's search path.
pub(crate) async fn apply_scripts(pool: &sqlx::PgPool, scripts: Vec<pgq_core::Migration>) {
    let mut conn = pool.acquire().await.unwrap();
    for migration in scripts {
        let mut tx = sqlx::Connection::begin(&mut *conn).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(migration.sql))
            .execute(&mut *tx)
            .await
            .unwrap_or_else(|err| panic!("{}: {err}", migration.name));
        tx.commit().await.unwrap();
    }
}

#[tokio::test]
async fn a_schema_applied_by_another_tool_from_pgqs_scripts_is_recognised() {
    use pgq_core::{Client, JobOutcome, Task};

    #[derive(serde::Serialize, serde::Deserialize, Task)]
    #[task(queue = "vendored")]
    struct Vendored;
    #[pgq_core::async_trait]
    impl pgq_core::Handler for Vendored {
        async fn handle(self, _ctx: &pgq_core::JobContext) -> Result<(), pgq_core::TaskError> {
            Ok(())
        }
    }

    let db = unmigrated_database().await;
    let client = Client::new(db.pool().clone())
        .with_schema("vendored_jobs")
        .unwrap();
    let scripts = client.migrations();
    assert_eq!(
        scripts.iter().map(|m| m.version).collect::<Vec<_>>(),
        (1..=scripts.len() as i64).collect::<Vec<_>>(),
        "every version, in order"
    );
    assert_eq!(
        pgq_core::migrations().len(),
        scripts.len(),
        "the same migrations for schema pgq"
    );
    apply_scripts(db.pool(), scripts).await;

    // migrate() finds everything applied and runs no DDL: a role that may not create anything
    // in the database can run it.
    // Named after the test's database, so that runs at once do not meet; with a password, so
    // that a server that asks for one lets it in.
    let app = format!("{}_vendored", db.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE \"{app}\" LOGIN PASSWORD '{app}';
         GRANT USAGE ON SCHEMA vendored_jobs TO \"{app}\";
         GRANT SELECT ON vendored_jobs.migrations TO \"{app}\";"
    )))
    .execute(db.pool())
    .await
    .unwrap();
    let app_pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(db.connect_options().username(&app).password(&app))
        .await
        .unwrap();
    let as_app = Client::new(app_pool.clone())
        .with_schema("vendored_jobs")
        .unwrap();
    let migrated = as_app.migrate().await;
    app_pool.close().await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP OWNED BY \"{app}\"; DROP ROLE \"{app}\""
    )))
    .execute(db.pool())
    .await
    .unwrap();
    migrated.expect("up to date: nothing to apply, no privilege needed");
    client.migrate().await.unwrap();

    // The functions keep pgq's own search path, whatever the tool's was.
    let paths: Vec<String> = sqlx::query_scalar(
        "SELECT array_to_string(p.proconfig, ',') FROM pg_proc p
         JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'vendored_jobs'",
    )
    .fetch_all(db.pool())
    .await
    .unwrap();
    assert!(!paths.is_empty());
    for path in paths {
        assert_eq!(path, "search_path=pg_catalog, vendored_jobs");
    }

    // And pgq runs on it.
    let id = client.enqueue(Vendored).await.unwrap().id();
    let drained = pgq_core::Worker::builder(client)
        .queue("vendored", 1)
        .build()
        .unwrap()
        .drain()
        .await
        .unwrap();
    assert_eq!(drained.len(), 1);
    assert_eq!(
        (drained[0].id, drained[0].outcome),
        (id, JobOutcome::Completed)
    );
}

#[tokio::test]
async fn without_pgqs_schema_calls_fail_with_schema_missing_and_a_worker_waits_for_it() {
    let db = unmigrated_database().await;
    let client = db.client();
    let err = client.enqueue(BeforeMigrate).await.unwrap_err();
    assert!(
        matches!(&err, Error::SchemaMissing { message } if message.contains("pgq.jobs")),
        "{err:?}"
    );
    assert!(err.to_string().contains("`pgq migrate`"), "{err}");
    assert!(matches!(
        client.stats().await.unwrap_err(),
        Error::SchemaMissing { .. }
    ));
    // A worker started before the migration keeps trying, and runs what comes after it.
    let worker = Worker::builder(client.clone())
        .queue("unmigrated", 2)
        .poll_interval(Duration::from_millis(100))
        .build()
        .unwrap();
    let handle = worker.start();
    client.migrate().await.unwrap();
    client.enqueue(BeforeMigrate).await.unwrap();
    support::completed(&handle, 1).await;
    handle.shutdown().await.unwrap();
}

/// A schema older than the binary (a deploy whose migration has not run yet) gives
/// `SchemaMissing` too, whatever is missing: a table, or a column of one. (A missing column was
/// a raw database error.)
#[tokio::test]
async fn a_schema_older_than_the_binary_gets_schema_missing() {
    let db = unmigrated_database().await;
    let older = pgq_core::migrations()
        .into_iter()
        .filter(|migration| migration.version <= 8)
        .collect();
    apply_scripts(db.pool(), older).await;
    let client = db.client();
    let err = client
        .set_queue_limit("partner-api", Some(2))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::SchemaMissing { message } if message.contains("concurrency_limit")),
        "{err:?}"
    );
    assert!(err.to_string().contains("older than this pgq"), "{err}");
    assert!(matches!(
        client.schedules().await.unwrap_err(),
        Error::SchemaMissing { .. }
    ));
}

/// A trigger of the application's on pgq's table that names a field the row lacks is the
/// application's error, not a schema pgq lacks.
#[tokio::test]
async fn an_applications_trigger_naming_a_missing_field_is_not_schema_missing() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql(
        "CREATE FUNCTION public.tenant_of() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE NOTICE '%', NEW.tenant; RETURN NEW; END $$;
         CREATE TRIGGER tenant_of BEFORE INSERT ON pgq.jobs
             FOR EACH ROW EXECUTE FUNCTION public.tenant_of();",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let err = db.client().enqueue(BeforeMigrate).await.unwrap_err();
    assert!(matches!(err, Error::Database(_)), "{err:?}");
    // Nor one writing to a column or a table of its own that is not there.
    for body in [
        "INSERT INTO public.audit (missing) VALUES (1)",
        "INSERT INTO public.nowhere (id) VALUES (1)",
    ] {
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "CREATE TABLE IF NOT EXISTS public.audit (id int);
             CREATE OR REPLACE FUNCTION public.tenant_of() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN {body}; RETURN NEW; END $$;"
        )))
        .execute(db.pool())
        .await
        .unwrap();
        let err = db.client().enqueue(BeforeMigrate).await.unwrap_err();
        assert!(matches!(err, Error::Database(_)), "{body}: {err:?}");
    }
}

/// The application's own statements, whose errors its `?` converts into pgq's, keep what they
/// were: a column its code reads that its rows lack, a write to its generated column.
#[tokio::test]
async fn an_applications_own_errors_stay_database_errors() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql("CREATE TABLE public.orders (id int GENERATED ALWAYS AS IDENTITY, total int)")
        .execute(db.pool())
        .await
        .unwrap();
    let generated: Error = sqlx::query("INSERT INTO public.orders (id, total) VALUES (1, 2)")
        .execute(db.pool())
        .await
        .unwrap_err()
        .into();
    assert!(matches!(generated, Error::Database(_)), "{generated:?}");
    let row = sqlx::query("SELECT 1 AS total")
        .fetch_one(db.pool())
        .await
        .unwrap();
    let unread: Error = row.try_get::<i32, _>("totl").unwrap_err().into();
    assert!(matches!(unread, Error::Database(_)), "{unread:?}");
}

#[tokio::test]
async fn a_client_naming_a_schema_that_was_never_migrated_gets_schema_missing() {
    let db = TestDatabase::new().await;
    let client = db.client().with_schema("never_migrated").unwrap();
    let err = client.enqueue(BeforeMigrate).await.unwrap_err();
    assert!(
        matches!(&err, Error::SchemaMissing { message } if message.contains("never_migrated.jobs")),
        "{err:?}"
    );
    // The default schema is there all along.
    db.client().enqueue(BeforeMigrate).await.unwrap();
}

#[tokio::test]
async fn a_database_error_reads_with_its_code_and_without_the_servers_source_line() {
    let db = TestDatabase::new().await;
    let missing = db
        .connect_options()
        .database(&format!("{}_missing", db.name()))
        .to_url_lossy()
        .to_string();
    let err = Client::connect(&missing)
        .await
        .expect_err("no such database");
    let text = err.to_string();
    assert!(matches!(err, Error::Database(_)), "{err:?}");
    assert!(text.contains("does not exist (SQLSTATE 3D000)"), "{text}");
    assert!(!text.contains(" at line "), "{text}");
}

#[tokio::test]
async fn a_url_of_another_scheme_is_refused_before_any_connection() {
    let db = TestDatabase::new().await;
    // Otherwise a PostgreSQL URL of a reachable server: sqlx alone would connect to it.
    let url = db.url().replacen("postgres", "mysql", 1);
    assert!(url.starts_with("mysql://"), "{url}");
    let err = Client::connect(&url)
        .await
        .expect_err("not a PostgreSQL URL");
    assert!(matches!(err, Error::Database(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("a PostgreSQL URL starts with postgres:// or postgresql://"),
        "{err}"
    );
}

/// A database at migration 0011 with a pending job whose concurrency key no index entry can
/// hold, which would have failed every claim of its queue: after the upgrade the job runs, and
/// a process that read jobs before the upgrade, on a connection that prepared its statements
/// then, still reads them.
#[tokio::test]
async fn an_upgrade_makes_an_over_long_key_claimable_and_running_processes_read_on() {
    use pgq_core::{JobId, JobOutcome};

    #[derive(Serialize, Deserialize, Task)]
    #[task(queue = "upgraded")]
    struct Upgraded;
    #[async_trait]
    impl Handler for Upgraded {
        async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
            Ok(())
        }
    }

    let db = unmigrated_database().await;
    apply_scripts(
        db.pool(),
        pgq_core::migrations().into_iter().take(11).collect(),
    )
    .await;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO pgq.jobs (task, queue, payload, concurrency_key, concurrency_limit)
         SELECT 'Upgraded', 'upgraded', 'null', string_agg(md5(g::text), ''), 1
         FROM generate_series(1, 100) AS g
         RETURNING id",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    let id = JobId::from(id);
    let one_connection = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let running = Client::new(one_connection.clone());
    assert!(running.job(id).await.unwrap().is_some());

    db.client().migrate().await.unwrap();
    let job = running.job(id).await.expect("read after the upgrade");
    assert_eq!(job.map(|job| job.id), Some(id));
    let key: String = sqlx::query_scalar("SELECT concurrency_key FROM pgq.jobs")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert!(key.starts_with("md5:") && key.len() == 36, "{key}");
    let drained = pgq_testkit::drain(&db.client(), "upgraded").await;
    assert_eq!(
        drained
            .iter()
            .map(|d| (d.id, d.outcome))
            .collect::<Vec<_>>(),
        vec![(id, JobOutcome::Completed)]
    );
    one_connection.close().await;
}

/// A worker and a client keep working when a migration changes the type of a column their
/// prepared statements return, as a newer release's migration may while they run: each
/// connection that prepared them before is refused them once, and prepares them again.
#[tokio::test]
async fn a_worker_and_a_client_run_on_through_a_migration_that_changes_what_they_read() {
    let db = TestDatabase::new().await;
    run_on_through_a_migration(&db.client(), db.pool(), "unmigrated", || BeforeMigrate).await;
}

/// Runs a job of `task()` on a worker of `queue`, changes the type of a column the worker's and
/// the client's prepared statements return, and runs another.
pub(crate) async fn run_on_through_a_migration<T: Task>(
    client: &Client,
    pool: &sqlx::PgPool,
    queue: &str,
    task: impl Fn() -> T,
) {
    use pgq_core::JobOutcome;

    let worker = Worker::builder(client.clone())
        .queue(queue, 2)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let before = client.enqueue(task()).await.unwrap().id();
    assert_eq!(
        support::finished(&mut events, before).await.0,
        JobOutcome::Completed
    );
    assert!(client.job(before).await.unwrap().is_some());

    sqlx::raw_sql("ALTER TABLE pgq.jobs ALTER COLUMN task TYPE text")
        .execute(pool)
        .await
        .unwrap();
    let after = client.enqueue(task()).await.unwrap().id();
    assert_eq!(
        support::finished(&mut events, after).await.0,
        JobOutcome::Completed
    );
    assert_eq!(client.job(after).await.unwrap().unwrap().task, T::NAME);
    handle.shutdown().await.unwrap();
}

/// Every call of `client` that reads or writes pgq's tables, by name, with what it returned
/// when that was not `Error::SchemaMissing`.
async fn calls_not_schema_missing(db: &TestDatabase, client: &Client) -> Vec<String> {
    every_call(db.pool(), client)
        .await
        .into_iter()
        .filter_map(|(name, result)| match result {
            Err(Error::SchemaMissing { .. }) => None,
            other => Some(format!("{name}: {other:?}")),
        })
        .collect()
}

/// Every call of `client` that reads or writes pgq's tables, by name, with what it returned
/// (`pool`: a connection for the calls inside a transaction).
pub(crate) async fn every_call(
    pool: &sqlx::PgPool,
    client: &Client,
) -> Vec<(&'static str, pgq_core::Result<()>)> {
    use pgq_core::{JobFilter, JobId, RateLimit, Retention};
    let id = JobId::from(1);
    let mut conn = pool.acquire().await.unwrap();
    vec![
        ("enqueue", client.enqueue(BeforeMigrate).await.map(drop)),
        (
            "enqueue_many",
            client.enqueue_many(vec![BeforeMigrate]).await.map(drop),
        ),
        (
            "enqueue_in",
            client.enqueue_in(&mut conn, BeforeMigrate).await.map(drop),
        ),
        (
            "enqueue_many_in",
            client
                .enqueue_many_in(&mut conn, vec![BeforeMigrate])
                .await
                .map(drop),
        ),
        ("job", client.job(id).await.map(drop)),
        ("cancel", client.cancel(id).await.map(drop)),
        ("retry", client.retry(id).await.map(drop)),
        ("workers", client.workers().await.map(drop)),
        ("release_worker", client.release_worker("w").await.map(drop)),
        ("rescue_expired", client.rescue_expired().await.map(drop)),
        (
            "delete_finished",
            client.delete_finished(Retention::default()).await.map(drop),
        ),
        ("stats", client.stats().await.map(drop)),
        ("jobs", client.jobs(&JobFilter::new()).await.map(drop)),
        (
            "count_jobs",
            client.count_jobs(&JobFilter::new()).await.map(drop),
        ),
        ("cancel_jobs", client.cancel_jobs(vec![id]).await.map(drop)),
        (
            "run_jobs_now",
            client.run_jobs_now(vec![id]).await.map(drop),
        ),
        ("queues", client.queues().await.map(drop)),
        (
            "finished_history",
            client.finished_history().await.map(drop),
        ),
        ("pause_queue", client.pause_queue("q").await.map(drop)),
        ("resume_queue", client.resume_queue("q").await.map(drop)),
        (
            "set_queue_limit",
            client.set_queue_limit("q", Some(2)).await.map(drop),
        ),
        (
            "set_queue_rate",
            client
                .set_queue_rate("q", RateLimit::new(2, Duration::from_secs(1)))
                .await
                .map(drop),
        ),
        ("schedules", client.schedules().await.map(drop)),
    ]
}

#[tokio::test]
async fn every_call_without_pgqs_tables_is_schema_missing() {
    // Never migrated.
    let db = unmigrated_database().await;
    let wrong = calls_not_schema_missing(&db, &db.client()).await;
    assert!(wrong.is_empty(), "{wrong:#?}");
    // Another schema named.
    let db = TestDatabase::new().await;
    let client = db.client().with_schema("never_migrated").unwrap();
    let wrong = calls_not_schema_missing(&db, &client).await;
    assert!(wrong.is_empty(), "{wrong:#?}");
    // The schema is there but empty (made by hand, or its tables dropped).
    let db = unmigrated_database().await;
    sqlx::raw_sql("CREATE SCHEMA pgq")
        .execute(db.pool())
        .await
        .unwrap();
    let wrong = calls_not_schema_missing(&db, &db.client()).await;
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[tokio::test]
async fn a_failed_migration_reads_with_the_databases_code() {
    let db = unmigrated_database().await;
    sqlx::raw_sql("CREATE SCHEMA pgq; CREATE TABLE pgq.jobs (id int)")
        .execute(db.pool())
        .await
        .unwrap();
    let err = db.client().migrate().await.unwrap_err();
    let Error::Migration {
        version, message, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(*version, 1);
    assert!(
        message.contains("already exists (SQLSTATE 42P07)"),
        "{message}"
    );
    assert!(!message.contains(" at line "), "{message}");
}

/// A database of its own in `LATIN1` beside `db`'s (named after it with `suffix`), and a client
/// of it; drop it with [`drop_database`].
async fn latin1_database(db: &TestDatabase, suffix: &str) -> (Client, String) {
    let name = format!("{}_{suffix}", db.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE DATABASE \"{name}\" ENCODING 'LATIN1' TEMPLATE template0 \
         LC_COLLATE 'C' LC_CTYPE 'C'"
    )))
    .execute(db.pool())
    .await
    .unwrap();
    let url = db
        .connect_options()
        .database(&name)
        .to_url_lossy()
        .to_string();
    (Client::connect(&url).await.unwrap(), name)
}

async fn drop_database(db: &TestDatabase, name: &str) {
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP DATABASE \"{name}\" WITH (FORCE)"
    )))
    .execute(db.pool())
    .await
    .unwrap();
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "latin1")]
struct GreetLatin1 {
    name: String,
}

#[async_trait]
impl Handler for GreetLatin1 {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

#[tokio::test]
async fn a_latin1_database_is_migrated_and_runs_jobs() {
    let db = TestDatabase::new().await;
    let (client, name) = latin1_database(&db, "latin1").await;
    client.migrate().await.unwrap();
    // Run again, it finds every migration applied as written.
    client.migrate().await.unwrap();

    let id = client
        .enqueue(GreetLatin1 {
            name: "Zoë".into()
        })
        .await
        .unwrap()
        .id();
    // A character the database's encoding lacks is refused with its error; nothing is stored.
    let err = client
        .enqueue(GreetLatin1 { name: "→".into() })
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Database(_)), "{err:?}");
    let drained = Worker::builder(client.clone())
        .queue("latin1", 1)
        .build()
        .unwrap()
        .drain()
        .await
        .unwrap();
    assert_eq!(drained.len(), 1);
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.status, pgq_core::JobStatus::Completed);
    assert_eq!(job.payload["name"], "Zoë");

    client.pool().close().await;
    drop_database(&db, &name).await;
}

/// Fails with a message in Cyrillic, or one too long to keep whole (a payload in Cyrillic
/// would be refused at the enqueue, as the test above shows).
#[derive(Serialize, Deserialize, Task)]
#[task(queue = "latin1", max_attempts = 1)]
struct RefusedLatin1 {
    long: bool,
}

#[async_trait]
impl Handler for RefusedLatin1 {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        match self.long {
            true => Err(TaskError::fail("x".repeat(3000))),
            false => Err(TaskError::fail("ошибка")),
        }
    }
}

/// Reports a stage, then completes in its own transaction.
#[derive(Serialize, Deserialize, Task)]
#[task(queue = "latin1")]
struct StagedLatin1;

#[async_trait]
impl Handler for StagedLatin1 {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(50, "étape → un").await;
        let pool = ctx.state::<sqlx::PgPool>().expect("the pool in state");
        let mut tx = pool.begin().await?;
        ctx.complete_in(&mut tx).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Text pgq stores on a job that a `LATIN1` database cannot hold — an error in Cyrillic, pgq's
/// own `…` after a cut message, a stage with an arrow — is stored in ASCII, and the outcome
/// is written: never lost to what it says.
#[tokio::test]
async fn a_latin1_database_keeps_outcomes_whose_text_it_cannot_hold() {
    let db = TestDatabase::new().await;
    let (client, name) = latin1_database(&db, "latin1_text").await;
    client.migrate().await.unwrap();
    let cyrillic = client
        .enqueue(RefusedLatin1 { long: false })
        .await
        .unwrap()
        .id();
    let long = client
        .enqueue(RefusedLatin1 { long: true })
        .await
        .unwrap()
        .id();
    let staged = client.enqueue(StagedLatin1).await.unwrap().id();
    let drained = Worker::builder(client.clone())
        .queue("latin1", 1)
        .state(client.pool().clone())
        .build()
        .unwrap()
        .drain()
        .await
        .unwrap();
    assert_eq!(drained.len(), 3);

    let job = client.job(cyrillic).await.unwrap().unwrap();
    assert_eq!(job.status, pgq_core::JobStatus::Failed);
    assert_eq!(
        job.last_error.as_deref(),
        Some("\\u{43e}\\u{448}\\u{438}\\u{431}\\u{43a}\\u{430}")
    );
    let job = client.job(long).await.unwrap().unwrap();
    assert_eq!(job.status, pgq_core::JobStatus::Failed);
    let error = job.last_error.unwrap();
    assert!(
        error.starts_with("xxxx") && error.contains("\\u{2026}"),
        "{error}"
    );
    assert!(error.len() <= pgq_core::limits::MAX_ERROR_BYTES);
    let job = client.job(staged).await.unwrap().unwrap();
    assert_eq!(job.status, pgq_core::JobStatus::Completed);
    assert_eq!(
        job.current_stage.as_deref(),
        Some("\\u{e9}tape \\u{2192} un")
    );

    client.pool().close().await;
    drop_database(&db, &name).await;
}

/// A tool applying pgq's first script in a transaction it keeps open, and `client.migrate()`
/// started meanwhile: returned once the migration waits on the lock the tool's transaction
/// holds. Commit the transaction to let it go on.
async fn migrate_behind_a_tools_script(
    db: &TestDatabase,
    client: &Client,
) -> (
    sqlx::Transaction<'static, sqlx::Postgres>,
    tokio::task::JoinHandle<pgq_core::Result<()>>,
) {
    let first = client.migrations().remove(0);
    let mut tool = db.pool().begin().await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(first.sql))
        .execute(&mut *tool)
        .await
        .unwrap();
    let migrating = tokio::spawn({
        let client = client.clone();
        async move { client.migrate().await }
    });
    support::eventually(|| async {
        let waiting: bool = sqlx::query_scalar(
            "SELECT EXISTS (SELECT FROM pg_stat_activity
             WHERE datname = current_database() AND wait_event_type = 'Lock')",
        )
        .fetch_one(db.pool())
        .await
        .unwrap();
        waiting.then_some(())
    })
    .await;
    (tool, migrating)
}

/// The same, on a connection that looked for pgq's schema before it existed (`pgq migrate` asks
/// what is missing first): the session's memory of names it did not find must not hide what
/// the tool committed while the migration waited.
#[tokio::test]
async fn migrate_after_a_look_finds_what_a_tool_applied_meanwhile() {
    let db = unmigrated_database().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_with(db.connect_options())
        .await
        .unwrap();
    let client = Client::new(pool);
    assert!(
        client
            .migration_states()
            .await
            .unwrap()
            .iter()
            .all(|state| state.applied_at.is_none())
    );
    migrate_past_a_tools_script(
        &db,
        &client,
        "migrate finds the tool's script applied and applies the rest",
    )
    .await;
}

/// [`migrate_behind_a_tools_script`], then the tool's commit: the migration must go on and
/// succeed (`why` says what it found).
async fn migrate_past_a_tools_script(db: &TestDatabase, client: &Client, why: &str) {
    let (tool, migrating) = migrate_behind_a_tools_script(db, client).await;
    tool.commit().await.unwrap();
    migrating.await.unwrap().expect(why);
}

/// A role whose statements are limited (as the pooler's guide has it, `ALTER ROLE .. SET
/// statement_timeout`): `migrate()` waits for another process's migration, and runs its DDL,
/// without those limits, as the README says.
#[tokio::test]
async fn migrate_is_not_cut_short_by_the_roles_time_limits() {
    let db = unmigrated_database().await;
    let limited = db
        .connect_options()
        .options([("statement_timeout", "1"), ("lock_timeout", "1")]);
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .connect_with(limited)
        .await
        .unwrap();
    let client = Client::new(pool.clone());
    migrate_past_a_tools_script(
        &db,
        &client,
        "migrate waits, then applies the rest whatever the role's limits",
    )
    .await;
    let versions: i64 = sqlx::query_scalar("SELECT count(*) FROM pgq.migrations")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(versions, pgq_core::migrations().len() as i64);
    pool.close().await;
}

/// A migration tool applying pgq's scripts and `migrate()` at the same moment (an application
/// that migrates on start while a deploy's tool runs): `migrate()` waits for the script's
/// transaction, then finds it applied, instead of running the same DDL beside it.
#[tokio::test]
async fn migrate_waits_for_a_script_a_tool_is_applying() {
    let db = unmigrated_database().await;
    let client = pgq_core::Client::new(db.pool().clone());
    migrate_past_a_tools_script(
        &db,
        &client,
        "migrate finds the tool's script applied and applies the rest",
    )
    .await;
    let versions: Vec<i64> = sqlx::query_scalar("SELECT version FROM pgq.migrations ORDER BY 1")
        .fetch_all(db.pool())
        .await
        .unwrap();
    assert_eq!(
        versions,
        (1..=pgq_core::migrations().len() as i64).collect::<Vec<_>>()
    );
}
