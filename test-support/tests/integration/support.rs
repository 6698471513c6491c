//! Queries the tests share, each with a time limit.

use std::future::Future;
use std::time::Duration;

use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection, PgConnection};

/// The longest anything that should work may take.
pub(crate) const LIMIT: Duration = Duration::from_secs(20);

/// `future`'s output, failing the test if it takes longer than [`LIMIT`].
pub(crate) async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(LIMIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what} took longer than {LIMIT:?}"))
}

/// A new connection, which must succeed.
pub(crate) async fn connect(options: &PgConnectOptions) -> PgConnection {
    within("connecting", PgConnection::connect_with(options))
        .await
        .unwrap_or_else(|err| panic!("cannot connect: {err}"))
}

/// One value of one query, which must succeed.
pub(crate) async fn scalar<T>(connection: &mut PgConnection, sql: &'static str) -> T
where
    T: Send + Unpin + for<'r> sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    within(sql, sqlx::query_scalar(sql).fetch_one(connection))
        .await
        .unwrap_or_else(|err| panic!("{sql} failed: {err}"))
}

/// Client sessions on the server other than the caller's.
pub(crate) async fn other_sessions(connection: &mut PgConnection) -> i64 {
    scalar(
        connection,
        "SELECT count(*) FROM pg_stat_activity \
         WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
    )
    .await
}
