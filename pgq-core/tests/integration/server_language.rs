//! pgq on a server that writes its messages in another language (`lc_messages`; German here, as
//! a server set up on a German system is). Whatever pgq tells apart by the server's errors — a
//! schema missing or older than the binary, a statement prepared before a migration changed
//! what it returns — it tells apart by their codes and routines, never by English words.
//!
//! Needs the machine's `de_DE.UTF-8` locale, which `scripts/test` makes when it is missing.

use std::process::Command;

use pgq_core::{Client, Error, Handler, JobContext, Task, TaskError};
use pgq_test_support::{Cluster, ClusterOptions};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use crate::migrate::{apply_scripts, every_call, run_on_through_a_migration};

const LOCALE: &str = "de_DE.UTF-8";

#[derive(Serialize, Deserialize, Task)]
#[task(queue = "sprache")]
struct Auftrag;

#[pgq_core::async_trait]
impl Handler for Auftrag {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// A cluster of its own whose server writes German, checked: a test that met English messages
/// would prove nothing.
async fn german_cluster() -> Cluster {
    let locales = Command::new("locale")
        .arg("-a")
        .output()
        .expect("`locale -a` runs");
    let locales = String::from_utf8_lossy(&locales.stdout).to_lowercase();
    assert!(
        locales
            .lines()
            .any(|l| l == "de_de.utf8" || l == "de_de.utf-8"),
        "the {LOCALE} locale is missing; scripts/test makes it \
         (as root: localedef -i de_DE -f UTF-8 {LOCALE})"
    );
    let cluster = Cluster::with_options(ClusterOptions::new().setting("lc_messages", LOCALE)).await;
    let pool = pool(&cluster, "postgres").await;
    let err = sqlx::query("SELECT 1 / 0")
        .execute(&pool)
        .await
        .unwrap_err();
    let message = err.as_database_error().unwrap().message().to_owned();
    assert_eq!(
        message, "Division durch Null",
        "the server does not write German"
    );
    cluster
}

async fn pool(cluster: &Cluster, database: &str) -> PgPool {
    let options = if database == "postgres" {
        cluster.connect_options()
    } else {
        cluster.create_database(database).await
    };
    PgPoolOptions::new()
        .max_connections(4)
        .connect_with(options)
        .await
        .unwrap()
}

/// Every call gives `SchemaMissing`, or works, on a database that has none of pgq's schema and
/// on one with each older version of it; none gives the server's error instead.
#[tokio::test]
async fn a_missing_or_older_schema_is_schema_missing_in_any_language() {
    let cluster = german_cluster().await;
    let migrations = pgq_core::migrations();
    let mut wrong = Vec::new();
    for applied in 0..migrations.len() {
        let pool = pool(&cluster, &format!("version_{applied}")).await;
        apply_scripts(&pool, migrations[..applied].to_vec()).await;
        let client = Client::new(pool.clone());
        let results = every_call(&pool, &client).await;
        if applied == 0 {
            // Nothing of pgq's: nothing can work.
            wrong.extend(
                results
                    .iter()
                    .filter(|(_, result)| !matches!(result, Err(Error::SchemaMissing { .. })))
                    .map(|(name, result)| format!("none applied, {name}: {result:?}")),
            );
        }
        wrong.extend(
            results
                .iter()
                .filter(|(_, result)| matches!(result, Err(err) if !matches!(err, Error::SchemaMissing { .. })))
                .map(|(name, result)| format!("{applied} applied, {name}: {result:?}")),
        );
        pool.close().await;
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A field an application's trigger reads from pgq's row, which the row lacks, stays the
/// application's error in German too.
#[tokio::test]
async fn an_applications_trigger_error_is_not_schema_missing_in_any_language() {
    let cluster = german_cluster().await;
    let pool = pool(&cluster, "anwendung").await;
    let client = Client::new(pool.clone());
    client.migrate().await.unwrap();
    sqlx::raw_sql(
        "CREATE FUNCTION public.tenant_of() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN RAISE NOTICE '%', NEW.tenant; RETURN NEW; END $$;
         CREATE TRIGGER tenant_of BEFORE INSERT ON pgq.jobs
             FOR EACH ROW EXECUTE FUNCTION public.tenant_of();",
    )
    .execute(&pool)
    .await
    .unwrap();
    let err = client.enqueue(Auftrag).await.unwrap_err();
    assert!(matches!(err, Error::Database(_)), "{err:?}");
}

/// A worker and a client run on through a migration that changes the type of a column their
/// prepared statements return: the server's refusal of each stale statement, in German, is
/// still read as one, and the statement prepared again.
#[tokio::test]
async fn jobs_run_on_through_a_migration_in_any_language() {
    let cluster = german_cluster().await;
    let pool = pool(&cluster, "betrieb").await;
    let client = Client::new(pool.clone());
    client.migrate().await.unwrap();
    run_on_through_a_migration(&client, &pool, "sprache", || Auftrag).await;
}
