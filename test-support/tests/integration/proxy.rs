//! TcpProxy in front of a cluster: pass, blackhole, reset, and back to pass.

use std::io::ErrorKind;
use std::time::{Duration, Instant};

use pgq_test_support::{Cluster, ProxyMode, TcpProxy};
use sqlx::Connection;
use sqlx::PgConnection;

use crate::support::{LIMIT, connect, other_sessions, scalar, within};

/// How long a query through a blackhole is given, to show that it does not complete.
const HANG: Duration = Duration::from_secs(1);

#[tokio::test]
async fn a_query_passes_through_the_proxy() {
    let cluster = Cluster::new().await;
    let proxy = TcpProxy::new(cluster.addr()).await;
    assert_eq!(proxy.mode(), ProxyMode::Pass);
    assert_eq!(proxy.connections(), 0);
    let options = proxy.connect_options(&cluster.connect_options());
    assert_eq!(options.get_port(), proxy.port());
    assert_eq!(proxy.addr().port(), proxy.port());

    let mut connection = connect(&options).await;
    let port: String = scalar(&mut connection, "SHOW port").await;
    assert_eq!(port, cluster.port().to_string());
    let rows: i64 = scalar(
        &mut connection,
        "SELECT count(*) FROM generate_series(1, 100000)",
    )
    .await;
    assert_eq!(rows, 100_000);
    assert_eq!(proxy.connections(), 1);
    connection.close().await.unwrap();
}

#[tokio::test]
async fn a_blackhole_hangs_queries_and_the_server_sees_nothing() {
    let cluster = Cluster::new().await;
    let proxy = TcpProxy::new(cluster.addr()).await;
    let options = proxy.connect_options(&cluster.connect_options());
    let mut direct = connect(&cluster.connect_options()).await;
    let mut victim = connect(&options).await;
    let pid: i32 = scalar(&mut victim, "SELECT pg_backend_pid()").await;
    assert_eq!(other_sessions(&mut direct).await, 1);

    proxy.set_mode(ProxyMode::Blackhole);
    let hung = tokio::time::timeout(
        HANG,
        sqlx::query("SELECT 'blackholed'").execute(&mut victim),
    );
    assert!(hung.await.is_err(), "a query completed through a blackhole");
    let seen: String = sqlx::query_scalar("SELECT query FROM pg_stat_activity WHERE pid = $1")
        .bind(pid)
        .fetch_one(&mut direct)
        .await
        .unwrap();
    assert_eq!(
        seen, "SELECT pg_backend_pid()",
        "the server saw the blackholed query"
    );

    let opened = proxy.connections();
    let new = tokio::time::timeout(HANG, PgConnection::connect_with(&options)).await;
    assert!(new.is_err(), "a connection was made through a blackhole");
    assert_eq!(proxy.connections(), opened + 1);
    assert_eq!(
        other_sessions(&mut direct).await,
        1,
        "the server saw the new connection"
    );

    // Back to pass: new connections work; the blackholed one stays dead.
    proxy.set_mode(ProxyMode::Pass);
    let mut fresh = connect(&options).await;
    assert_eq!(scalar::<i32>(&mut fresh, "SELECT 1").await, 1);
    let still = tokio::time::timeout(HANG, sqlx::query("SELECT 1").execute(&mut victim));
    assert!(
        still.await.is_err(),
        "a blackholed connection came back to life"
    );

    // A reset ends it at last.
    proxy.set_mode(ProxyMode::Reset);
    let ended = within("the reset", sqlx::query("SELECT 1").execute(&mut victim)).await;
    assert!(ended.is_err());
}

#[tokio::test]
async fn a_reset_fails_queries_fast_until_the_proxy_passes_again() {
    let cluster = Cluster::new().await;
    let proxy = TcpProxy::new(cluster.addr()).await;
    let options = proxy.connect_options(&cluster.connect_options());
    let mut direct = connect(&cluster.connect_options()).await;
    let mut victim = connect(&options).await;
    let pid: i32 = scalar(&mut victim, "SELECT pg_backend_pid()").await;

    proxy.set_mode(ProxyMode::Reset);
    let started = Instant::now();
    let failed = within(
        "a query on a reset connection",
        sqlx::query("SELECT 1").execute(&mut victim),
    )
    .await;
    let err = failed.expect_err("a query passed a reset");
    assert!(
        started.elapsed() < HANG,
        "failing took {:?}",
        started.elapsed()
    );
    // A RST, not a FIN: the connection was reset, or the next write found it reset.
    let reset = match &err {
        sqlx::Error::Io(io) => matches!(
            io.kind(),
            ErrorKind::ConnectionReset | ErrorKind::BrokenPipe
        ),
        _ => false,
    };
    assert!(reset, "{err:?}");

    let started = Instant::now();
    let refused = within(
        "connecting during a reset",
        PgConnection::connect_with(&options),
    )
    .await;
    assert!(refused.is_err(), "a connection was made during a reset");
    assert!(
        started.elapsed() < HANG,
        "refusing took {:?}",
        started.elapsed()
    );

    // The server lost the session too.
    let deadline = Instant::now() + LIMIT;
    loop {
        let alive: bool =
            sqlx::query_scalar("SELECT count(*) > 0 FROM pg_stat_activity WHERE pid = $1")
                .bind(pid)
                .fetch_one(&mut direct)
                .await
                .unwrap();
        if !alive {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server kept the reset session"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    proxy.set_mode(ProxyMode::Pass);
    let mut fresh = connect(&options).await;
    assert_eq!(scalar::<i32>(&mut fresh, "SELECT 1").await, 1);
    assert_eq!(proxy.connections(), 3);
}
