//! Reaching the database: the URL from `--database-url` or `DATABASE_URL`, the schema checked
//! before any connection, and a connection failure that names the URL, never its password.

use std::time::Duration;

use pgq_core::Client;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection};

use crate::args::Global;
use crate::failure::Failure;

/// How long the CLI waits for a connection before it says it cannot reach the database.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client on the database and schema the options name, once a connection to it was made:
/// a refused or unanswered connection fails here, with the URL and the reason.
pub(crate) async fn client(global: &Global) -> Result<Client, Failure> {
    client_with(global, 2).await
}

/// [`client`], with a pool of up to `connections`.
pub(crate) async fn client_with(global: &Global, connections: u32) -> Result<Client, Failure> {
    let url = global.database_url.as_deref().ok_or_else(|| {
        Failure::Usage("no database given: set DATABASE_URL or pass --database-url".into())
    })?;
    let shown = redact(url);
    // sqlx would read another scheme's host and database as PostgreSQL's.
    let scheme = url
        .split_once("://")
        .map(|(scheme, _)| scheme.to_ascii_lowercase());
    if !matches!(scheme.as_deref(), Some("postgres" | "postgresql")) {
        return Err(Failure::Usage(format!(
            "invalid database URL {shown}: a PostgreSQL URL starts with postgres:// or postgresql://"
        )));
    }
    let options: PgConnectOptions = url
        .parse()
        .map_err(|err| Failure::Usage(format!("invalid database URL {shown}: {err}")))?;
    let pool = PgPoolOptions::new()
        .max_connections(connections)
        .acquire_timeout(CONNECT_TIMEOUT)
        .test_before_acquire(false)
        .connect_lazy_with(options.clone());
    let client = Client::new(pool).with_schema(&global.schema)?;
    let client = if global.behind_pooler {
        client.behind_pooler()
    } else {
        client
    };
    // The pool would retry a refused connection until its timeout and then say only that it
    // timed out; one connection made here says why.
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(&options)).await {
        Err(_) => Err(Failure::Failed(format!(
            "cannot connect to {shown}: no answer within {}s",
            CONNECT_TIMEOUT.as_secs()
        ))),
        Ok(Err(err)) => Err(Failure::Failed(format!(
            "cannot connect to {shown}: {}",
            pgq_core::Error::from(err)
        ))),
        Ok(Ok(connection)) => {
            let _ = connection.close().await;
            Ok(client)
        }
    }
}

/// `url` without its password, wherever it is: `user:secret@` (the secret may hold `@`, `?`
/// or `/`: the user info ends at the last `@`) or `password=secret`. A string that is not a URL
/// (a `key=value` connection string may hold `password=`) is not shown at all.
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not shown: it is not a URL)".to_owned();
    };
    let rest = match rest.rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or_default();
            format!("{user}{}", &rest[at..])
        }
        None => rest.to_owned(),
    };
    let (base, query) = match rest.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (rest.as_str(), None),
    };
    let kept: Vec<&str> = query
        .into_iter()
        .flat_map(|query| query.split('&'))
        .filter(|pair| !pair.to_ascii_lowercase().starts_with("password="))
        .collect();
    if kept.is_empty() {
        format!("{scheme}://{base}")
    } else {
        format!("{scheme}://{base}?{}", kept.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_left_out() {
        assert_eq!(
            redact("postgres://app:s3cr:et@db:5432/app?sslmode=require"),
            "postgres://app@db:5432/app?sslmode=require"
        );
        assert_eq!(
            redact("postgres://db/app?password=x&sslmode=disable"),
            "postgres://db/app?sslmode=disable"
        );
        assert_eq!(redact("postgres://app@db/app"), "postgres://app@db/app");
        assert_eq!(redact("postgres://db/app?Password=x"), "postgres://db/app");
        assert_eq!(
            redact("postgres://app:p?ss@db/app"),
            "postgres://app@db/app"
        );
        assert_eq!(
            redact("postgres://app:p@s/s@db/app?x=1"),
            "postgres://app@db/app?x=1"
        );
        assert_eq!(
            redact("host=db user=app password=s3cret"),
            "(not shown: it is not a URL)"
        );
    }
}
