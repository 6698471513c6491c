//! The first `TestDatabase` of a process drops the test databases killed test processes left,
//! and nothing else. One test in this file, so that its `TestDatabase::new()` is its process's
//! first.

use std::process::{Child, Command};

use pgq_testkit::{DEFAULT_DATABASE_URL, TestDatabase};
use sqlx::postgres::PgConnectOptions;
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, PgConnection};

fn server() -> PgConnectOptions {
    std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| DEFAULT_DATABASE_URL.into())
        .parse()
        .unwrap()
}

async fn create(admin: &mut PgConnection, name: &str) {
    sqlx::raw_sql(AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(admin)
        .await
        .unwrap();
}

async fn exists(admin: &mut PgConnection, name: &str) -> bool {
    sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
        .bind(name)
        .fetch_one(admin)
        .await
        .unwrap()
}

/// Ends the process and drops the databases when the test ends, however it ends.
struct Cleanup {
    live: Child,
    names: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = self.live.kill();
        let _ = self.live.wait();
        let names = std::mem::take(&mut self.names);
        let dropper = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let mut admin = server().connect().await.unwrap();
                for name in names {
                    let drop = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::raw_sql(AssertSqlSafe(drop)).execute(&mut admin).await;
                }
            });
        });
        let _ = dropper.join();
    }
}

#[tokio::test]
async fn the_first_test_database_drops_those_of_test_processes_that_are_gone() {
    let mut admin = server().connect().await.unwrap();
    let mut gone = Command::new("true").spawn().unwrap();
    gone.wait().unwrap();
    let gone = gone.id();
    let live = Command::new("sleep").arg("600").spawn().unwrap();
    let left = format!("pgq_test_{gone}_0_1");
    let of_a_live_process = format!("pgq_test_{}_0_1", live.id());
    let in_use = format!("pgq_test_{gone}_1_1");
    let not_a_test_database = format!("pgq_test_{gone}_keep");
    let cleanup = Cleanup {
        live,
        names: vec![
            left.clone(),
            of_a_live_process.clone(),
            in_use.clone(),
            not_a_test_database.clone(),
        ],
    };
    for name in &cleanup.names {
        create(&mut admin, name).await;
    }
    let session = server().database(&in_use).connect().await.unwrap();

    let db = TestDatabase::new().await;

    assert!(!exists(&mut admin, &left).await, "{left} was left behind");
    for kept in [&of_a_live_process, &in_use, &not_a_test_database] {
        assert!(exists(&mut admin, kept).await, "{kept} was dropped");
    }
    assert!(exists(&mut admin, db.name()).await);
    session.close().await.unwrap();
    drop(cleanup);
}
