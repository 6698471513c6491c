//! A TLS cluster: `sslmode=require` and `verify-full` work, a wrong root certificate is refused.

use pgq_test_support::{Cluster, ClusterOptions};
use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::{Connection, PgConnection};

use crate::support::{connect, scalar};

const USES_TLS: &str = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()";

#[tokio::test]
async fn a_tls_cluster_takes_require_and_verify_full_and_refuses_a_wrong_root() {
    let (cluster, other) = tokio::join!(
        Cluster::with_options(ClusterOptions::new().tls(true)),
        Cluster::with_options(ClusterOptions::new().tls(true)),
    );
    let ca = cluster.ca_cert().expect("a TLS cluster has a CA");
    assert!(ca.is_file());

    let require = cluster.connect_options().ssl_mode(PgSslMode::Require);
    assert!(scalar::<bool>(&mut connect(&require).await, USES_TLS).await);

    let verify = cluster
        .connect_options()
        .ssl_mode(PgSslMode::VerifyFull)
        .ssl_root_cert(ca);
    assert!(scalar::<bool>(&mut connect(&verify).await, USES_TLS).await);
    let by_name = verify.clone().host("localhost");
    assert!(scalar::<bool>(&mut connect(&by_name).await, USES_TLS).await);
    let url: PgConnectOptions = format!("{}&sslmode=verify-full", cluster.url())
        .parse()
        .unwrap();
    assert!(scalar::<bool>(&mut connect(&url).await, USES_TLS).await);

    // Another cluster's CA did not sign this server's certificate.
    let wrong = verify.ssl_root_cert(other.ca_cert().unwrap());
    let refused = PgConnection::connect_with(&wrong).await;
    let message = refused.expect_err("a wrong root was accepted").to_string();
    assert!(message.to_lowercase().contains("certificate"), "{message}");

    // Without TLS the same server still answers.
    let plain = cluster.connect_options().ssl_mode(PgSslMode::Disable);
    assert!(!scalar::<bool>(&mut connect(&plain).await, USES_TLS).await);
}
