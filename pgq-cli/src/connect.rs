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

/// `url` as sqlx reads it (a WHATWG URL), without its password: the user, host, port and
/// database, and of the query only the settings sqlx knows that hold no secret. A string it
/// cannot read that way is not shown at all: a `key=value` connection string, or a URL whose
/// password holds an unescaped `/`, `?` or `#`, which would put part of the password in the
/// port, path or query.
pub(crate) fn redact(url: &str) -> String {
    const NOT_SHOWN: &str = "(not shown: it is not a URL)";
    const SHOWN_SETTINGS: [&str; 14] = [
        "sslmode",
        "ssl-mode",
        "sslrootcert",
        "ssl-root-cert",
        "ssl-ca",
        "sslcert",
        "ssl-cert",
        "statement-cache-capacity",
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "application_name",
    ];
    let Ok(parsed) = url::Url::parse(url) else {
        return NOT_SHOWN.to_owned();
    };
    let misplaced = parsed.path().contains('@')
        || parsed.fragment().is_some()
        || parsed.query_pairs().any(|(key, _)| key.contains('@'));
    if misplaced {
        return NOT_SHOWN.to_owned();
    }
    // Written out piece by piece: a URL without a host (a Unix socket's, `?host=/run/..`) takes
    // no changes to its user info through `url`.
    let user = match parsed.username() {
        "" => String::new(),
        user => format!("{user}@"),
    };
    let port = parsed
        .port()
        .map(|port| format!(":{port}"))
        .unwrap_or_default();
    let mut shown = format!(
        "{}://{user}{}{port}{}",
        parsed.scheme(),
        parsed.host_str().unwrap_or_default(),
        parsed.path()
    );
    let kept: Vec<(String, String)> = parsed
        .query_pairs()
        .filter(|(key, _)| SHOWN_SETTINGS.contains(&key.as_ref()))
        .map(|(key, value)| (key.into_owned(), value.into_owned()))
        .collect();
    if !kept.is_empty() {
        let query = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(kept)
            .finish();
        shown.push('?');
        shown.push_str(&query);
    }
    shown
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
        // An unescaped `@` in the password: the user info ends at the last `@`.
        assert_eq!(
            redact("postgres://app:p@ss@db/app?x=1"),
            "postgres://app@db/app"
        );
        // An `@` in the query (an Azure `user@server` login) ends no user info.
        assert_eq!(
            redact("postgres://db:1/app?user=admin@srv&password=hunter2"),
            "postgres://db:1/app?user=admin%40srv"
        );
        assert_eq!(
            redact("postgres://app:pw@db:5432/app?application_name=ops@laptop"),
            "postgres://app@db:5432/app?application_name=ops%40laptop"
        );
        // A Unix socket's URL has no host.
        assert_eq!(
            redact("postgres:///app?host=/tmp&password=pw"),
            "postgres:///app?host=%2Ftmp"
        );
        // A password with `/`, `?` or `#` would spill into the port, path or query.
        for url in [
            "postgres://app:p?ss@db/app",
            "postgres://app:12?ss@db/app",
            "postgres://app:p@s/s@db/app?x=1",
            "postgres://app:12/ss@db/app",
            "postgres://app:12#ss@db/app",
            "host=db user=app password=s3cret",
        ] {
            assert_eq!(redact(url), "(not shown: it is not a URL)", "{url}");
        }
    }
}
