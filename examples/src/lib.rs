//! Shared by the example programs: where their database is.

use pgq_core::Client;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

/// The server examples use when `DATABASE_URL` is not set.
pub const DEFAULT_SERVER_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The database examples run in, created on first use so they never touch yours.
pub const EXAMPLES_DATABASE: &str = "pgq_examples";

/// Connection options for the examples' database: `DATABASE_URL` when it is set, otherwise
/// [`EXAMPLES_DATABASE`] on the local default server, created if it does not exist yet.
pub async fn examples_database() -> Result<PgConnectOptions, sqlx::Error> {
    if let Ok(url) = std::env::var("DATABASE_URL") {
        return url.parse();
    }
    let server: PgConnectOptions = DEFAULT_SERVER_URL.parse()?;
    let mut conn = server.connect().await?;
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(EXAMPLES_DATABASE)
            .fetch_one(&mut conn)
            .await?;
    if !exists {
        // A constant name: DDL cannot bind it. Two examples starting at once may race here.
        let created = sqlx::raw_sql(AssertSqlSafe(format!(
            "CREATE DATABASE {EXAMPLES_DATABASE}"
        )))
        .execute(&mut conn)
        .await;
        if let Err(err) = created {
            let duplicate = err
                .as_database_error()
                .and_then(|e| e.code())
                .is_some_and(|code| code == "42P04" || code == "23505");
            if !duplicate {
                return Err(err);
            }
        }
    }
    conn.close().await?;
    Ok(server.database(EXAMPLES_DATABASE))
}

/// A migrated client on the examples' database (see [`examples_database`]), on a pool made as
/// `Client::connect` makes one. The quickstart shows these steps one by one.
pub async fn client() -> Result<Client, pgq_core::Error> {
    let pool = PgPoolOptions::new()
        .max_connections(pgq_core::defaults::MAX_CONNECTIONS)
        .test_before_acquire(false)
        .connect_with(examples_database().await?)
        .await?;
    let client = Client::new(pool);
    client.migrate().await?;
    Ok(client)
}
