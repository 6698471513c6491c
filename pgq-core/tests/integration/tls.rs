//! pgq over TLS (built with the `tls-rustls` feature, or `tls-native-tls`): against a cluster
//! with `ssl = on` and a certificate of its own CA, every connection pgq opens — the client's,
//! the worker's dispatch and upkeep connections, its listener — is encrypted, with
//! `sslmode=require` and with `verify-full`.

use pgq_core::{Client, Handler, JobContext, JobOutcome, Task, TaskError, Worker, async_trait};
use pgq_test_support::{Cluster, ClusterOptions};
use serde::{Deserialize, Serialize};
use sqlx::postgres::{PgPoolOptions, PgSslMode};

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "encrypted")]
struct OverTls {
    n: u32,
}

#[async_trait]
impl Handler for OverTls {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

async fn works_over(cluster: &Cluster, mode: PgSslMode) {
    let admin = cluster.connect_options();
    let database = format!("tls_{}", format!("{mode:?}").to_lowercase());
    let options = cluster.create_database(&database).await.ssl_mode(mode);
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .test_before_acquire(false)
        .connect_with(options)
        .await
        .unwrap();
    let client = Client::new(pool);
    client.migrate().await.unwrap();
    let worker = Worker::builder(client.clone())
        .queue("encrypted", 2)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| {
        *e == pgq_core::WorkerEvent::ListenerConnected
    })
    .await;
    let id = client.enqueue(OverTls { n: 1 }).await.unwrap().id();
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );

    // Every connection to the database, pgq's own included, is encrypted.
    let (all, encrypted): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE s.ssl)
         FROM pg_stat_activity a JOIN pg_stat_ssl s ON s.pid = a.pid
         WHERE a.datname = $1",
    )
    .bind(&database)
    .fetch_one(&sqlx::PgPool::connect_with(admin).await.unwrap())
    .await
    .unwrap();
    assert!(
        all >= 3,
        "the client's, the worker's and the listener's: {all}"
    );
    assert_eq!(encrypted, all, "{mode:?}");
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn every_connection_is_encrypted_with_require_and_with_verify_full() {
    let cluster = Cluster::with_options(ClusterOptions::new().tls(true)).await;
    works_over(&cluster, PgSslMode::Require).await;
    works_over(&cluster, PgSslMode::VerifyFull).await;
}
