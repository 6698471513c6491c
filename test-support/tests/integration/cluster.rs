//! Cluster: start, query, stop, restart, kill and recover, roles, databases, parallel starts.

use std::path::PathBuf;

use pgq_test_support::{Cluster, ClusterOptions};
use sqlx::{Connection, PgConnection};

use crate::support::{connect, scalar, within};

#[tokio::test]
async fn a_cluster_starts_with_its_settings_and_answers() {
    let cluster = Cluster::with_options(ClusterOptions::new().setting("work_mem", "5MB")).await;
    let mut connection = connect(&cluster.connect_options()).await;
    assert_eq!(scalar::<i32>(&mut connection, "SELECT 1").await, 1);
    assert_eq!(scalar::<String>(&mut connection, "SHOW fsync").await, "off");
    assert_eq!(
        scalar::<String>(&mut connection, "SHOW work_mem").await,
        "5MB"
    );
    let port: String = scalar(&mut connection, "SHOW port").await;
    assert_eq!(port, cluster.port().to_string());
    assert_eq!(cluster.addr().port(), cluster.port());
    let by_url = connect(&cluster.url().parse().unwrap()).await;
    by_url.close().await.unwrap();
    assert!(cluster.ca_cert().is_none());
}

#[tokio::test]
async fn clusters_started_together_get_ports_of_their_own() {
    let (a, b, c) = tokio::join!(Cluster::new(), Cluster::new(), Cluster::new());
    let ports = [a.port(), b.port(), c.port()];
    assert!(ports[0] != ports[1] && ports[1] != ports[2] && ports[0] != ports[2]);
    for cluster in [&a, &b, &c] {
        let mut connection = connect(&cluster.connect_options()).await;
        assert_eq!(scalar::<i32>(&mut connection, "SELECT 1").await, 1);
    }
}

#[tokio::test]
async fn a_restart_ends_sessions_and_keeps_data_and_port() {
    let mut cluster = Cluster::new().await;
    let options = cluster.create_database("app").await;
    let mut old = connect(&options).await;
    sqlx::raw_sql("CREATE TABLE kept (n int); INSERT INTO kept VALUES (7)")
        .execute(&mut old)
        .await
        .unwrap();
    let port = cluster.port();

    cluster.stop().await;
    assert!(PgConnection::connect_with(&options).await.is_err());
    cluster.start().await;
    assert_eq!(cluster.port(), port);
    assert!(sqlx::raw_sql("SELECT 1").execute(&mut old).await.is_err());
    let mut new = connect(&options).await;
    assert_eq!(scalar::<i32>(&mut new, "SELECT n FROM kept").await, 7);

    cluster.restart().await;
    assert!(sqlx::raw_sql("SELECT 1").execute(&mut new).await.is_err());
    let mut again = connect(&options).await;
    assert_eq!(scalar::<i32>(&mut again, "SELECT n FROM kept").await, 7);
}

#[tokio::test]
async fn a_killed_cluster_recovers_every_commit_on_start() {
    let mut cluster = Cluster::new().await;
    let options = cluster.create_database("app").await;
    let mut connection = connect(&options).await;
    sqlx::raw_sql("CREATE TABLE jobs (id int); INSERT INTO jobs SELECT generate_series(1, 1000)")
        .execute(&mut connection)
        .await
        .unwrap();

    cluster.kill().await;
    assert!(
        sqlx::raw_sql("SELECT 1")
            .execute(&mut connection)
            .await
            .is_err()
    );
    assert!(PgConnection::connect_with(&options).await.is_err());
    cluster.start().await;

    assert!(cluster.log().contains("automatic recovery in progress"));
    let mut connection = connect(&options).await;
    assert_eq!(
        scalar::<i64>(&mut connection, "SELECT count(*) FROM jobs").await,
        1000
    );
    // And again, from a server that has itself recovered.
    cluster.kill().await;
    cluster.start().await;
    let mut connection = connect(&options).await;
    assert_eq!(
        scalar::<i64>(&mut connection, "SELECT count(*) FROM jobs").await,
        1000
    );
}

#[tokio::test]
async fn a_role_with_a_password_must_give_it_and_one_without_is_trusted() {
    let cluster = Cluster::new().await;
    cluster.create_role("app", Some("s3cret'\"")).await;
    cluster.create_role("reader", None).await;
    let app = cluster.connect_options().username("app");

    let refused = PgConnection::connect_with(&app.clone().password("wrong")).await;
    let message = refused
        .expect_err("a wrong password was accepted")
        .to_string();
    assert!(
        message.contains("password authentication failed"),
        "{message}"
    );
    assert!(PgConnection::connect_with(&app).await.is_err());
    let mut connection = connect(&app.password("s3cret'\"")).await;
    assert_eq!(
        scalar::<String>(&mut connection, "SELECT current_user::text").await,
        "app"
    );

    let mut reader = connect(&cluster.connect_options().username("reader")).await;
    let superuser: String = scalar(&mut reader, "SHOW is_superuser").await;
    assert_eq!(superuser, "off");
}

#[tokio::test]
async fn dropping_a_cluster_stops_it_and_removes_its_directory() {
    let cluster = Cluster::new().await;
    let options = cluster.connect_options();
    let mut connection = connect(&options).await;
    let data: String = scalar(&mut connection, "SHOW data_directory").await;
    let data = PathBuf::from(data);
    assert!(data.join("PG_VERSION").is_file());

    drop(cluster);
    assert!(!data.exists(), "{} is still there", data.display());
    assert!(data.parent().is_some_and(|scratch| !scratch.exists()));
    let refused = within("connecting", PgConnection::connect_with(&options)).await;
    assert!(refused.is_err());
}

#[tokio::test]
async fn a_panicking_test_still_removes_its_cluster() {
    let data = tokio::spawn(async {
        let cluster = Cluster::new().await;
        let mut connection = connect(&cluster.connect_options()).await;
        let data: String = scalar(&mut connection, "SHOW data_directory").await;
        panic!("{data}");
    })
    .await
    .expect_err("the task panicked");
    let data = PathBuf::from(*data.into_panic().downcast::<String>().unwrap());
    assert!(data.is_absolute());
    assert!(!data.exists(), "{} is still there", data.display());
}
