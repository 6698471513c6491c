//! [`PgBouncer`]: a real `pgbouncer` process in front of a server.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use sqlx::postgres::PgConnectOptions;

use crate::port::free_port;
use crate::process::{log_len, log_since};
use crate::scratch::ScratchDir;

/// `max_prepared_statements` unless the options say otherwise: how many protocol-level
/// prepared statements PgBouncer keeps per server connection and prepares again wherever a
/// client's transaction lands.
pub const DEFAULT_MAX_PREPARED_STATEMENTS: u32 = 100;

/// `ignore_startup_parameters` unless the options say otherwise: sqlx sends
/// `extra_float_digits`, which PgBouncer refuses unless told to ignore it.
pub const DEFAULT_IGNORE_STARTUP_PARAMETERS: &str = "extra_float_digits";

/// The first PgBouncer release that knows `max_prepared_statements`; older ones refuse to start
/// with it, so it is left out for them.
const PREPARED_STATEMENTS_SINCE: (u32, u32) = (1, 21);

/// How long a start may take.
const START_LIMIT: Duration = Duration::from_secs(30);

/// How often a start checks whether PgBouncer listens.
const POLL: Duration = Duration::from_millis(20);

/// How many ports a start tries when others take the ones it picked.
const PORT_ATTEMPTS: u32 = 10;

/// Where `pgbouncer` is looked for besides `PATH` (Debian installs it in `/usr/sbin`).
const PLACES: [&str; 3] = ["/usr/sbin", "/usr/local/sbin", "/usr/local/bin"];

/// How PgBouncer shares server connections between clients (`pool_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PoolMode {
    /// A server connection per client session.
    Session,
    /// A server connection per transaction: consecutive transactions of one client may run on
    /// different server connections.
    #[default]
    Transaction,
    /// A server connection per statement; multi-statement transactions are refused.
    Statement,
}

impl PoolMode {
    fn as_str(self) -> &'static str {
        match self {
            Self::Session => "session",
            Self::Transaction => "transaction",
            Self::Statement => "statement",
        }
    }
}

/// What a [`PgBouncer`] is started with.
///
/// ```no_run
/// # async fn example(cluster: pgq_test_support::Cluster) {
/// use pgq_test_support::{PgBouncer, PgBouncerOptions, PoolMode};
///
/// let options = PgBouncerOptions::new()
///     .pool_mode(PoolMode::Session)
///     .setting("default_pool_size", "2");
/// let bouncer = PgBouncer::with_options(cluster.addr(), options).await;
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PgBouncerOptions {
    pool_mode: PoolMode,
    max_prepared_statements: u32,
    ignore_startup_parameters: String,
    auth_type: String,
    users: Vec<(String, String)>,
    settings: Vec<(String, String)>,
}

impl Default for PgBouncerOptions {
    fn default() -> Self {
        Self {
            pool_mode: PoolMode::Transaction,
            max_prepared_statements: DEFAULT_MAX_PREPARED_STATEMENTS,
            ignore_startup_parameters: DEFAULT_IGNORE_STARTUP_PARAMETERS.to_owned(),
            auth_type: "trust".to_owned(),
            users: vec![(crate::SUPERUSER.to_owned(), String::new())],
            settings: Vec::new(),
        }
    }
}

impl PgBouncerOptions {
    /// Transaction pooling, [`DEFAULT_MAX_PREPARED_STATEMENTS`],
    /// [`DEFAULT_IGNORE_STARTUP_PARAMETERS`], `auth_type = trust` and one user, `postgres`.
    ///
    /// ```
    /// let options = pgq_test_support::PgBouncerOptions::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets `pool_mode`.
    ///
    /// ```
    /// use pgq_test_support::{PgBouncerOptions, PoolMode};
    ///
    /// let options = PgBouncerOptions::new().pool_mode(PoolMode::Session);
    /// ```
    pub fn pool_mode(mut self, mode: PoolMode) -> Self {
        self.pool_mode = mode;
        self
    }

    /// Sets `max_prepared_statements` (0 turns the tracking off). Written only for PgBouncer
    /// 1.21 and newer; [`PgBouncer::prepared_statements`] tells whether it is in force.
    ///
    /// ```
    /// let options = pgq_test_support::PgBouncerOptions::new().max_prepared_statements(0);
    /// ```
    pub fn max_prepared_statements(mut self, count: u32) -> Self {
        self.max_prepared_statements = count;
        self
    }

    /// Sets `ignore_startup_parameters`, a comma-separated list ("" ignores none).
    ///
    /// ```
    /// let options = pgq_test_support::PgBouncerOptions::new()
    ///     .ignore_startup_parameters("extra_float_digits, search_path");
    /// ```
    pub fn ignore_startup_parameters(mut self, names: impl Into<String>) -> Self {
        self.ignore_startup_parameters = names.into();
        self
    }

    /// Sets `auth_type` (`trust`, `md5`, `scram-sha-256`, …). Whatever it is, PgBouncer logs in
    /// to the server with the password its user list gives.
    ///
    /// ```
    /// let options = pgq_test_support::PgBouncerOptions::new()
    ///     .auth_type("scram-sha-256")
    ///     .user("app", "secret");
    /// ```
    pub fn auth_type(mut self, auth_type: impl Into<String>) -> Self {
        self.auth_type = auth_type.into();
        self
    }

    /// Adds a user to the user list (`auth_file`), with its password in plain text ("" for
    /// none). Every user a client connects as must be listed, `trust` included.
    ///
    /// ```
    /// let options = pgq_test_support::PgBouncerOptions::new().user("app", "secret");
    /// ```
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> Self {
        self.users.push((name.into(), password.into()));
        self
    }

    /// Adds a setting to the `[pgbouncer]` section; later settings win.
    ///
    /// ```
    /// let options = pgq_test_support::PgBouncerOptions::new()
    ///     .setting("default_pool_size", "2")
    ///     .setting("query_wait_timeout", "5");
    /// ```
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }
}

/// A `pgbouncer` process on a free port of 127.0.0.1, in front of one server, every database
/// name passed through. It runs as the `postgres` OS account when the tests run as root (it
/// refuses root), logs into its own temporary directory, and is killed when dropped.
///
/// Panics, naming the package to install, when `pgbouncer` is missing.
///
/// ```no_run
/// # async fn example(cluster: pgq_test_support::Cluster) {
/// let bouncer = pgq_test_support::PgBouncer::new(cluster.addr()).await;
/// let pool = sqlx::PgPool::connect_with(bouncer.connect_options(&cluster.connect_options()))
///     .await
///     .unwrap();
/// # }
/// ```
#[derive(Debug)]
pub struct PgBouncer {
    port: u16,
    version: (u32, u32, u32),
    prepared_statements: bool,
    log: PathBuf,
    process: Option<Child>,
    /// Last, so that the directory goes after `drop` has killed the process.
    scratch: ScratchDir,
}

impl PgBouncer {
    /// Starts PgBouncer with the default options in front of `server`, and returns once it
    /// accepts connections.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// let bouncer = pgq_test_support::PgBouncer::new(cluster.addr()).await;
    /// # }
    /// ```
    pub async fn new(server: SocketAddr) -> Self {
        Self::with_options(server, PgBouncerOptions::new()).await
    }

    /// Starts PgBouncer with `options` in front of `server`, and returns once it accepts
    /// connections.
    ///
    /// ```no_run
    /// # async fn example(cluster: pgq_test_support::Cluster) {
    /// use pgq_test_support::{PgBouncer, PgBouncerOptions, PoolMode};
    ///
    /// let options = PgBouncerOptions::new().pool_mode(PoolMode::Session);
    /// let bouncer = PgBouncer::with_options(cluster.addr(), options).await;
    /// # }
    /// ```
    pub async fn with_options(server: SocketAddr, options: PgBouncerOptions) -> Self {
        let (program, version) = program();
        let prepared_statements = (version.0, version.1) >= PREPARED_STATEMENTS_SINCE
            && options.max_prepared_statements > 0;
        let scratch = ScratchDir::new("pgbouncer");
        let users = scratch.join("userlist.txt");
        write_owned(&scratch, &users, &user_list(&options.users));
        let mut bouncer = Self {
            port: 0,
            version,
            prepared_statements,
            log: scratch.join("pgbouncer.log"),
            process: None,
            scratch,
        };
        let config = bouncer.scratch.join("pgbouncer.ini");
        let deadline = Instant::now() + START_LIMIT;
        for _ in 0..PORT_ATTEMPTS {
            bouncer.port = free_port();
            let text = bouncer.config(server, &options, &users);
            write_owned(&bouncer.scratch, &config, &text);
            let log_from = log_len(&bouncer.log);
            bouncer.spawn(program, &config);
            if bouncer.wait_until_listening(deadline, log_from).await {
                return bouncer;
            }
            let log = log_since(&bouncer.log, log_from);
            assert!(
                log.contains("Address already in use"),
                "pgbouncer exited instead of starting on port {}:\n{log}",
                bouncer.port
            );
        }
        panic!("pgbouncer found no free port in {PORT_ATTEMPTS} attempts");
    }

    /// The port clients connect to, on 127.0.0.1.
    ///
    /// ```no_run
    /// # async fn example(bouncer: pgq_test_support::PgBouncer) {
    /// let url = format!("postgres://postgres@127.0.0.1:{}/postgres", bouncer.port());
    /// # }
    /// ```
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address clients connect to.
    ///
    /// ```no_run
    /// # async fn example(bouncer: pgq_test_support::PgBouncer) {
    /// let proxy = pgq_test_support::TcpProxy::new(bouncer.addr()).await; // a client-side network
    /// # }
    /// ```
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `server`'s options with host and port pointing at PgBouncer (user, database and the rest
    /// kept).
    ///
    /// ```no_run
    /// # use pgq_test_support::{Cluster, PgBouncer};
    /// # async fn example(cluster: Cluster, bouncer: PgBouncer) {
    /// let through_bouncer = bouncer.connect_options(&cluster.connect_options());
    /// # }
    /// ```
    pub fn connect_options(&self, server: &PgConnectOptions) -> PgConnectOptions {
        server.clone().host("127.0.0.1").port(self.port)
    }

    /// The installed PgBouncer's version, as `(major, minor, patch)`.
    ///
    /// ```no_run
    /// # async fn example(bouncer: pgq_test_support::PgBouncer) {
    /// let (major, minor, _) = bouncer.version();
    /// # }
    /// ```
    pub fn version(&self) -> (u32, u32, u32) {
        self.version
    }

    /// Whether PgBouncer tracks protocol-level prepared statements (`max_prepared_statements`
    /// above 0, on PgBouncer 1.21 or newer). Without it, in transaction mode, a statement sqlx
    /// prepared on one server connection is unknown on the next one a client's transaction
    /// lands on.
    ///
    /// ```no_run
    /// # async fn example(bouncer: pgq_test_support::PgBouncer) {
    /// if !bouncer.prepared_statements() {
    ///     // expect "prepared statement \"sqlx_s_1\" does not exist" in transaction mode
    /// }
    /// # }
    /// ```
    pub fn prepared_statements(&self) -> bool {
        self.prepared_statements
    }

    /// PgBouncer's log so far.
    ///
    /// ```no_run
    /// # async fn example(bouncer: pgq_test_support::PgBouncer) {
    /// assert!(!bouncer.log().contains("FATAL"));
    /// # }
    /// ```
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The configuration file's text for the current port.
    fn config(&self, server: SocketAddr, options: &PgBouncerOptions, users: &Path) -> String {
        let mut settings: Vec<(&str, String)> = vec![
            ("listen_addr", "127.0.0.1".to_owned()),
            ("listen_port", self.port.to_string()),
            ("unix_socket_dir", String::new()),
            ("auth_type", options.auth_type.clone()),
            ("auth_file", users.display().to_string()),
            ("admin_users", crate::SUPERUSER.to_owned()),
            ("pool_mode", options.pool_mode.as_str().to_owned()),
            (
                "ignore_startup_parameters",
                options.ignore_startup_parameters.clone(),
            ),
        ];
        if (self.version.0, self.version.1) >= PREPARED_STATEMENTS_SINCE {
            let count = options.max_prepared_statements.to_string();
            settings.push(("max_prepared_statements", count));
        }
        settings.extend(
            options
                .settings
                .iter()
                .map(|(n, v)| (n.as_str(), v.clone())),
        );
        let mut text = format!(
            "[databases]\n* = host={} port={}\n\n[pgbouncer]\n",
            server.ip(),
            server.port()
        );
        for (name, value) in settings {
            assert!(
                !name.is_empty() && !name.contains(['=', '\n']) && !value.contains('\n'),
                "{name:?} = {value:?} is not a PgBouncer setting"
            );
            text.push_str(&format!("{name} = {value}\n"));
        }
        text
    }

    /// Runs `pgbouncer` in the foreground of a child process, its output going to the log.
    fn spawn(&mut self, program: &Path, config: &Path) {
        let log = File::options()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|err| panic!("cannot open {}: {err}", self.log.display()));
        let output = log
            .try_clone()
            .unwrap_or_else(|err| panic!("cannot share {}: {err}", self.log.display()));
        let mut command = self.scratch.user().command(program, self.scratch.path());
        command
            .arg(config)
            .stdin(Stdio::null())
            .stdout(output)
            .stderr(log);
        let child = command
            .spawn()
            .unwrap_or_else(|err| panic!("cannot start {}: {err}", program.display()));
        self.process = Some(child);
    }

    /// Polls until PgBouncer accepts a TCP connection (`true`) or exits (`false`).
    async fn wait_until_listening(&mut self, deadline: Instant, log_from: u64) -> bool {
        loop {
            let Some(process) = self.process.as_mut() else {
                return false;
            };
            if let Ok(Some(_)) = process.try_wait() {
                self.process = None;
                return false;
            }
            if tokio::net::TcpStream::connect(self.addr()).await.is_ok() {
                return true;
            }
            assert!(
                Instant::now() < deadline,
                "pgbouncer did not listen on port {} within {START_LIMIT:?}:\n{}",
                self.port,
                log_since(&self.log, log_from)
            );
            tokio::time::sleep(POLL).await;
        }
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        if let Some(mut process) = self.process.take() {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

/// The `pgbouncer` program and its version; panics, naming the package, when it is missing.
fn program() -> (&'static Path, (u32, u32, u32)) {
    static FOUND: OnceLock<(PathBuf, (u32, u32, u32))> = OnceLock::new();
    let (path, version) = FOUND.get_or_init(|| {
        let path = std::env::var_os("PATH")
            .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .chain(PLACES.iter().map(PathBuf::from))
            .map(|dir| dir.join("pgbouncer"))
            .find(|candidate| candidate.is_file())
            .unwrap_or_else(|| {
                panic!(
                    "pgbouncer is not installed (looked on PATH and in {PLACES:?}); install it: \
                     apt-get install -y pgbouncer"
                )
            });
        let output = Command::new(&path)
            .arg("--version")
            .output()
            .unwrap_or_else(|err| panic!("cannot run {} --version: {err}", path.display()));
        let text = String::from_utf8_lossy(&output.stdout);
        let version = parse_version(&text)
            .unwrap_or_else(|| panic!("cannot read a version in `pgbouncer --version`: {text:?}"));
        (path, version)
    });
    (path, *version)
}

/// `(1, 18, 0)` from "PgBouncer 1.18.0\n…".
fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let word = text.lines().next()?.strip_prefix("PgBouncer ")?;
    let mut numbers = word.trim().split('.').map(|n| n.parse::<u32>().ok());
    Some((
        numbers.next()??,
        numbers.next()??,
        numbers.next().flatten().unwrap_or(0),
    ))
}

/// The `auth_file` text: `"name" "password"` per user, quotes doubled.
fn user_list(users: &[(String, String)]) -> String {
    users
        .iter()
        .map(|(name, password)| {
            format!(
                "\"{}\" \"{}\"\n",
                name.replace('"', "\"\""),
                password.replace('"', "\"\"")
            )
        })
        .collect()
}

/// Writes a file in `scratch` that the server account reads.
fn write_owned(scratch: &ScratchDir, path: &Path, text: &str) {
    std::fs::write(path, text)
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", path.display()));
    scratch.user().own(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_version_reads_the_first_line() {
        let text = "PgBouncer 1.18.0\nlibevent 2.1.12-stable\n";
        assert_eq!(parse_version(text), Some((1, 18, 0)));
        assert_eq!(parse_version("PgBouncer 1.24\n"), Some((1, 24, 0)));
        assert_eq!(parse_version("pgbouncer, version unknown"), None);
    }

    #[test]
    fn user_list_quotes_names_and_passwords() {
        let users = [
            ("postgres".to_owned(), String::new()),
            ("a\"b".to_owned(), "p w".to_owned()),
        ];
        assert_eq!(user_list(&users), "\"postgres\" \"\"\n\"a\"\"b\" \"p w\"\n");
    }
}
