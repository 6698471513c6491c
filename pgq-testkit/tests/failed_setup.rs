//! A `TestDatabase` that cannot be made ready (its migration fails) panics and leaves no
//! database behind. On a cluster of its own whose template holds a `pgq.jobs` that is not
//! pgq's, so that every new database's migration fails; the `TestDatabase` is made in a child
//! process of this test binary, which the cluster's URL reaches as `DATABASE_URL`.

use std::process::Command;

use pgq_test_support::Cluster;
use sqlx::{Connection, PgConnection};

/// The child's test: ignored unless the parent runs it.
#[tokio::test]
#[ignore = "run by a_failed_setup_leaves_no_database_behind, against its own cluster"]
async fn child_makes_a_test_database() {
    pgq_testkit::TestDatabase::new().await;
}

#[tokio::test]
async fn a_failed_setup_leaves_no_database_behind() {
    let cluster = Cluster::new().await;
    let mut admin = PgConnection::connect_with(&cluster.connect_options().database("template1"))
        .await
        .unwrap();
    sqlx::raw_sql("CREATE SCHEMA pgq; CREATE TABLE pgq.jobs (id int)")
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.unwrap();

    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "child_makes_a_test_database"])
        .env("DATABASE_URL", cluster.url())
        .output()
        .unwrap();
    let output = String::from_utf8_lossy(&child.stdout).into_owned()
        + &String::from_utf8_lossy(&child.stderr);
    assert!(!child.status.success(), "{output}");
    assert!(output.contains("cannot migrate test database"), "{output}");

    let mut admin = PgConnection::connect_with(&cluster.connect_options())
        .await
        .unwrap();
    let left: Vec<String> =
        sqlx::query_scalar("SELECT datname::text FROM pg_database WHERE datname LIKE 'pgq_test_%'")
            .fetch_all(&mut admin)
            .await
            .unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
}
