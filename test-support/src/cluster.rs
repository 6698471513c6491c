//! [`Cluster`]: a throwaway PostgreSQL cluster of its own, which a test may stop, crash and
//! restart.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection, PgConnection};

use crate::certificate::TlsFiles;
use crate::cluster_options::{ClusterOptions, configure};
use crate::port::free_port;
use crate::process::{bin_dir, log_len, log_since, reap, run, server_processes};
use crate::scratch::ScratchDir;

/// The superuser `initdb` creates, whatever the OS user; [`Cluster::connect_options`] uses it.
pub const SUPERUSER: &str = "postgres";

/// How long a start may take, crash recovery included, before the test fails.
const START_LIMIT: Duration = Duration::from_secs(60);

/// How long a stop, or the exit of a killed cluster's processes, may take.
const STOP_LIMIT: Duration = Duration::from_secs(60);

/// How often a start checks whether the server accepts connections.
const POLL: Duration = Duration::from_millis(20);

/// How many ports a first start tries when others take the ones it picked.
const PORT_ATTEMPTS: u32 = 10;

/// Role and database DDL, quoted by the server from bound values (DDL cannot bind).
const CREATE_DATABASE: &str = "SELECT format('CREATE DATABASE %I', $1::text)";
const CREATE_ROLE: &str = "SELECT format('CREATE ROLE %I LOGIN', $1::text)";
const CREATE_PASSWORD_ROLE: &str =
    "SELECT format('CREATE ROLE %I LOGIN PASSWORD %L IN ROLE password_login', $1::text, $2::text)";
const CREATE_PASSWORD_GROUP: &str = "CREATE ROLE password_login NOLOGIN";

/// A PostgreSQL cluster of its own, in a new directory, on a free port of 127.0.0.1.
///
/// `initdb` makes it, with [`SUPERUSER`] as superuser and `trust` authentication for every
/// connection over TCP from 127.0.0.1 except the roles in [`PASSWORD_GROUP`](crate::PASSWORD_GROUP). When the tests run
/// as root, the server and its files belong to the `postgres` OS account.
///
/// Dropping the value stops the server (immediately) and removes its directory, on a panic too.
/// A test process killed outright leaves both behind in the temporary directory, named
/// `pgq-cluster-<pid>-<n>`.
///
/// ```no_run
/// # async fn example() {
/// let mut cluster = pgq_test_support::Cluster::new().await;
/// let pool = sqlx::PgPool::connect_with(cluster.connect_options()).await.unwrap();
/// cluster.kill().await; // the postmaster dies by SIGKILL, as in a crash
/// cluster.start().await; // crash recovery, on the same port
/// # }
/// ```
#[derive(Debug)]
pub struct Cluster {
    port: u16,
    /// The data directory, as the kernel spells it (the server processes' working directory).
    data: PathBuf,
    log: PathBuf,
    tls: Option<TlsFiles>,
    /// The postmaster, while it runs.
    postmaster: Option<Child>,
    /// Last, so that the directory goes after `drop` has stopped the server.
    scratch: ScratchDir,
}

impl Cluster {
    /// Makes and starts a cluster with the default options. Panics with the reason if it cannot.
    ///
    /// ```no_run
    /// # async fn example() {
    /// let cluster = pgq_test_support::Cluster::new().await;
    /// let one: i32 = sqlx::query_scalar("SELECT 1")
    ///     .fetch_one(&sqlx::PgPool::connect_with(cluster.connect_options()).await.unwrap())
    ///     .await
    ///     .unwrap();
    /// # }
    /// ```
    pub async fn new() -> Self {
        Self::with_options(ClusterOptions::new()).await
    }

    /// Makes and starts a cluster with `options`, and returns once it accepts connections.
    ///
    /// ```no_run
    /// # async fn example() {
    /// use pgq_test_support::{Cluster, ClusterOptions};
    ///
    /// let cluster = Cluster::with_options(ClusterOptions::new().tls(true)).await;
    /// assert!(cluster.ca_cert().is_some());
    /// # }
    /// ```
    pub async fn with_options(options: ClusterOptions) -> Self {
        let scratch = ScratchDir::new("cluster");
        let user = scratch.user();
        let data = scratch.join("data");
        let mut initdb = user.command(bin_dir().join("initdb"), scratch.path());
        initdb.arg("--pgdata").arg(&data).args([
            "--username",
            SUPERUSER,
            "--auth=trust",
            "--encoding=UTF8",
            "--locale=C",
            "--no-sync",
            "--no-instructions",
        ]);
        run(initdb, "initdb").await;
        let data = data
            .canonicalize()
            .unwrap_or_else(|err| panic!("cannot resolve {}: {err}", data.display()));

        let tls = if options.tls {
            let dir = scratch.join("tls");
            std::fs::create_dir(&dir)
                .unwrap_or_else(|err| panic!("cannot create {}: {err}", dir.display()));
            user.own(&dir);
            Some(TlsFiles::generate(&dir, user).await)
        } else {
            None
        };
        configure(&data, scratch.path(), tls.as_ref(), &options.settings);

        let mut cluster = Self {
            port: free_port(),
            log: scratch.join("postgres.log"),
            data,
            tls,
            postmaster: None,
            scratch,
        };
        cluster.boot(true).await;
        cluster.execute(CREATE_PASSWORD_GROUP, &[]).await;
        cluster
    }

    /// The port the server listens on, on 127.0.0.1; it stays the same across restarts.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// let psql = format!("psql -h 127.0.0.1 -p {} -U postgres", cluster.port());
    /// # }
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's address, for a [`TcpProxy`](crate::TcpProxy) or
    /// [`PgBouncer`](crate::PgBouncer) in front of it.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// let proxy = pgq_test_support::TcpProxy::new(cluster.addr()).await;
    /// # }
    /// ```
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Options for the `postgres` database as [`SUPERUSER`]; on a TLS cluster they carry the CA
    /// as root certificate, so `.ssl_mode(PgSslMode::VerifyFull)` is all a test adds.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// let app = cluster.connect_options().database("app").application_name("worker");
    /// # }
    /// ```
    pub fn connect_options(&self) -> PgConnectOptions {
        let options = PgConnectOptions::new_without_pgpass()
            .host("127.0.0.1")
            .port(self.port)
            .username(SUPERUSER)
            .database("postgres")
            .disable_statement_logging();
        match &self.tls {
            Some(tls) => options.ssl_root_cert(&tls.ca_cert),
            None => options,
        }
    }

    /// A URL of the `postgres` database as [`SUPERUSER`], for programs a test starts; on a TLS
    /// cluster it names the CA (`sslrootcert`).
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// let url = format!("{}&sslmode=verify-full", cluster.url()); // on a TLS cluster
    /// # }
    /// ```
    pub fn url(&self) -> String {
        let url = format!("postgres://{SUPERUSER}@127.0.0.1:{}/postgres", self.port);
        match &self.tls {
            Some(tls) => format!("{url}?sslrootcert={}", url_encode(&tls.ca_cert)),
            None => url,
        }
    }

    /// The CA certificate that signed the server's, on a TLS cluster.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// use sqlx::postgres::PgSslMode;
    ///
    /// let verified = cluster
    ///     .connect_options()
    ///     .ssl_mode(PgSslMode::VerifyFull)
    ///     .ssl_root_cert(cluster.ca_cert().unwrap());
    /// # }
    /// ```
    pub fn ca_cert(&self) -> Option<&Path> {
        self.tls.as_ref().map(|tls| tls.ca_cert.as_path())
    }

    /// The server's log so far, every start included.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// assert!(cluster.log().contains("database system is ready to accept connections"));
    /// # }
    /// ```
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Creates a database and returns options for it (as [`SUPERUSER`]).
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// let app = cluster.create_database("app").await;
    /// let pool = sqlx::PgPool::connect_with(app).await.unwrap();
    /// # }
    /// ```
    pub async fn create_database(&self, name: &str) -> PgConnectOptions {
        self.execute(CREATE_DATABASE, &[name]).await;
        self.connect_options().database(name)
    }

    /// Creates a role that may log in. With a password, the role joins [`PASSWORD_GROUP`](crate::PASSWORD_GROUP) and
    /// must give it (stored as `password_encryption` says: SCRAM unless a setting chose `md5`);
    /// without one it is trusted. It owns nothing and is no superuser.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// cluster.create_role("app", Some("secret")).await;
    /// let options = cluster.connect_options().username("app").password("secret");
    /// # }
    /// ```
    pub async fn create_role(&self, name: &str, password: Option<&str>) {
        match password {
            Some(password) => self.execute(CREATE_PASSWORD_ROLE, &[name, password]).await,
            None => self.execute(CREATE_ROLE, &[name]).await,
        }
    }

    /// Stops the server with a fast shutdown (sessions are ended, a checkpoint is written) and
    /// returns once it has exited. Does nothing when it is not running.
    ///
    /// ```no_run
    /// # async fn example(mut cluster: pgq_test_support::Cluster) {
    /// cluster.stop().await;
    /// assert!(sqlx::PgConnection::connect_with(&cluster.connect_options()).await.is_err());
    /// # use sqlx::Connection;
    /// # }
    /// ```
    pub async fn stop(&mut self) {
        let Some(postmaster) = self.postmaster.take() else {
            return;
        };
        let mut pg_ctl = self.pg_ctl_stop("fast");
        pg_ctl.stdout(Stdio::null());
        run(pg_ctl, "pg_ctl stop").await;
        reap(postmaster, "the stopped postmaster", STOP_LIMIT).await;
    }

    /// Starts a stopped or killed server again on the same port (after a kill, PostgreSQL runs
    /// crash recovery first), and returns once it accepts connections.
    ///
    /// ```no_run
    /// # async fn example(mut cluster: pgq_test_support::Cluster) {
    /// cluster.stop().await;
    /// cluster.start().await;
    /// # }
    /// ```
    pub async fn start(&mut self) {
        assert!(
            self.postmaster.is_none(),
            "the cluster on port {} is already running",
            self.port
        );
        self.boot(false).await;
    }

    /// Stops and starts the server: every session ends, and new ones work once this returns.
    ///
    /// ```no_run
    /// # async fn example(mut cluster: pgq_test_support::Cluster) {
    /// cluster.restart().await;
    /// # }
    /// ```
    pub async fn restart(&mut self) {
        self.stop().await;
        self.start().await;
    }

    /// Kills the postmaster with SIGKILL, as a crash or the OOM killer would, and returns once
    /// every process of the cluster is gone (the backends notice their postmaster's death and
    /// exit). Nothing is flushed; [`start`](Self::start) recovers from the WAL.
    ///
    /// ```no_run
    /// # async fn example(mut cluster: pgq_test_support::Cluster) {
    /// cluster.kill().await;
    /// cluster.start().await;
    /// # }
    /// ```
    pub async fn kill(&mut self) {
        let mut postmaster = self
            .postmaster
            .take()
            .unwrap_or_else(|| panic!("the cluster on port {} is not running", self.port));
        postmaster
            .kill()
            .unwrap_or_else(|err| panic!("cannot kill the postmaster: {err}"));
        reap(postmaster, "the killed postmaster", STOP_LIMIT).await;
        let deadline = Instant::now() + STOP_LIMIT;
        while server_processes(&self.data) > 0 {
            assert!(
                Instant::now() < deadline,
                "processes of the killed cluster in {} still run after {STOP_LIMIT:?}",
                self.data.display()
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// Starts the postmaster and waits until it accepts connections; on a first start, moves to
    /// another port when the chosen one was taken meanwhile.
    async fn boot(&mut self, first: bool) {
        let deadline = Instant::now() + START_LIMIT;
        let mut ports_tried = 1;
        loop {
            let log_from = log_len(&self.log);
            self.spawn();
            if self.wait_until_ready(deadline, log_from).await {
                return;
            }
            let log = log_since(&self.log, log_from);
            if log.contains("Address already in use") && first && ports_tried < PORT_ATTEMPTS {
                self.port = free_port();
                ports_tried += 1;
            } else if log.contains("pre-existing shared memory block") && Instant::now() < deadline
            {
                // Backends of a killed postmaster, not yet gone.
                tokio::time::sleep(POLL).await;
            } else {
                panic!(
                    "PostgreSQL in {} exited instead of starting on port {}:\n{log}",
                    self.data.display(),
                    self.port
                );
            }
        }
    }

    /// Runs `postgres` in the background, its output appended to the log.
    fn spawn(&mut self) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|err| panic!("cannot open {}: {err}", self.log.display()));
        let output = log
            .try_clone()
            .unwrap_or_else(|err| panic!("cannot share {}: {err}", self.log.display()));
        let mut postgres = self
            .scratch
            .user()
            .command(bin_dir().join("postgres"), self.scratch.path());
        postgres
            .arg("-D")
            .arg(&self.data)
            .arg("-p")
            .arg(self.port.to_string())
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(log);
        let child = postgres
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start postgres: {err}"));
        self.postmaster = Some(child);
    }

    /// Polls until the server answers a query (`true`) or its postmaster exits (`false`).
    async fn wait_until_ready(&mut self, deadline: Instant, log_from: u64) -> bool {
        let options = self.admin_options();
        loop {
            let Some(postmaster) = self.postmaster.as_mut() else {
                return false;
            };
            if let Ok(Some(_)) = postmaster.try_wait() {
                self.postmaster = None;
                return false;
            }
            let attempt = tokio::time::timeout(Duration::from_secs(5), async {
                let mut connection = PgConnection::connect_with(&options).await?;
                sqlx::raw_sql("SELECT 1").execute(&mut connection).await?;
                connection.close().await
            });
            if let Ok(Ok(())) = attempt.await {
                return true;
            }
            if Instant::now() > deadline {
                let _ = postmaster.kill();
                let _ = postmaster.wait();
                self.postmaster = None;
                panic!(
                    "PostgreSQL in {} did not accept connections on port {} within \
                     {START_LIMIT:?}:\n{}",
                    self.data.display(),
                    self.port,
                    log_since(&self.log, log_from)
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Options for the harness's own sessions: superuser, no TLS.
    fn admin_options(&self) -> PgConnectOptions {
        self.connect_options().ssl_mode(PgSslMode::Disable)
    }

    /// Has the server format a DDL statement from bound `values`, then runs it.
    async fn execute(&self, statement: &'static str, values: &[&str]) {
        let mut connection = PgConnection::connect_with(&self.admin_options())
            .await
            .unwrap_or_else(|err| panic!("cannot connect to the cluster on {}: {err}", self.port));
        let ddl = if values.is_empty() {
            statement.to_owned()
        } else {
            let query = values
                .iter()
                .fold(sqlx::query_scalar(statement), |query, value| {
                    query.bind(*value)
                });
            query
                .fetch_one(&mut connection)
                .await
                .unwrap_or_else(|err| panic!("cannot format {statement:?}: {err}"))
        };
        sqlx::raw_sql(AssertSqlSafe(ddl.clone()))
            .execute(&mut connection)
            .await
            .unwrap_or_else(|err| panic!("{ddl} failed: {err}"));
        let _ = connection.close().await;
    }

    /// `pg_ctl stop` in `mode`, waiting for the server to exit.
    fn pg_ctl_stop(&self, mode: &str) -> std::process::Command {
        let mut pg_ctl = self
            .scratch
            .user()
            .command(bin_dir().join("pg_ctl"), self.scratch.path());
        pg_ctl
            .args(["stop", "--wait", "--mode", mode, "--timeout"])
            .arg(STOP_LIMIT.as_secs().to_string())
            .arg("--pgdata")
            .arg(&self.data);
        pg_ctl
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let Some(mut postmaster) = self.postmaster.take() else {
            return;
        };
        let stopped = self
            .pg_ctl_stop("immediate")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if !stopped {
            let _ = postmaster.kill();
        }
        let _ = postmaster.wait();
        let deadline = Instant::now() + STOP_LIMIT;
        while server_processes(&self.data) > 0 && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
    }
}

/// A path as a URL query value: unreserved characters and `/` as they are, the rest escaped.
fn url_encode(path: &Path) -> String {
    path.display()
        .to_string()
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster_options::PASSWORD_GROUP;

    #[test]
    fn the_password_role_statement_names_the_password_group() {
        assert!(CREATE_PASSWORD_ROLE.contains(&format!("IN ROLE {PASSWORD_GROUP}'")));
        assert!(CREATE_PASSWORD_GROUP.contains(&format!("ROLE {PASSWORD_GROUP} ")));
    }

    #[test]
    fn url_encode_escapes_all_but_unreserved_and_slash() {
        assert_eq!(
            url_encode(Path::new("/tmp/a b/ca.crt")),
            "/tmp/a%20b/ca.crt"
        );
        assert_eq!(url_encode(Path::new("/x/é&=")), "/x/%C3%A9%26%3D");
    }
}
