//! [`ClusterOptions`], and the settings and authentication rules a cluster is written with.

use std::fs::File;
use std::io::Write;
use std::path::Path;

use crate::certificate::TlsFiles;

/// The group whose members log in with a password (`md5` in `pg_hba.conf`, which takes SCRAM
/// secrets too); everyone else is trusted. [`Cluster::create_role`] puts a role with a password
/// in it.
pub const PASSWORD_GROUP: &str = "password_login";

/// Settings every cluster gets before the test's own: fast and disposable, reachable on
/// 127.0.0.1 alone. Without `fsync` a machine crash could lose data, but a killed server loses
/// nothing committed: what it wrote is in the kernel's cache. `synchronous_commit` stays on, so
/// that a commit acknowledged before [`Cluster::kill`](crate::Cluster::kill) is still there
/// after it.
const BASE_SETTINGS: [(&str, &str); 4] = [
    ("listen_addresses", "127.0.0.1"),
    ("fsync", "off"),
    ("full_page_writes", "off"),
    ("shared_buffers", "16MB"),
];

/// What a cluster is started with; [`Cluster::with_options`](crate::Cluster::with_options)
/// takes it.
///
/// ```no_run
/// # async fn example() {
/// use pgq_test_support::{Cluster, ClusterOptions};
///
/// let options = ClusterOptions::new().tls(true).setting("max_connections", "20");
/// let cluster = Cluster::with_options(options).await;
/// # }
/// ```
#[derive(Debug, Clone, Default)]
pub struct ClusterOptions {
    pub(crate) tls: bool,
    pub(crate) settings: Vec<(String, String)>,
}

impl ClusterOptions {
    /// No TLS and no settings of the test's own.
    ///
    /// ```
    /// let options = pgq_test_support::ClusterOptions::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Turns TLS on (`ssl = on`) with a new CA and a certificate for `localhost` and
    /// `127.0.0.1` that it signed; [`Cluster::ca_cert`](crate::Cluster::ca_cert) names the
    /// CA's file. Connections without TLS are still accepted.
    ///
    /// ```
    /// let options = pgq_test_support::ClusterOptions::new().tls(true);
    /// ```
    pub fn tls(mut self, on: bool) -> Self {
        self.tls = on;
        self
    }

    /// Adds a `postgresql.conf` setting; later settings win over earlier ones and the defaults
    /// (`fsync = off`, `shared_buffers = 16MB`, …).
    ///
    /// ```
    /// let options = pgq_test_support::ClusterOptions::new()
    ///     .setting("idle_session_timeout", "2s")
    ///     .setting("max_connections", "20");
    /// ```
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }
}

/// Writes the cluster's settings into `postgresql.conf` and its rules into `pg_hba.conf`.
pub(crate) fn configure(
    data: &Path,
    sockets: &Path,
    tls: Option<&TlsFiles>,
    settings: &[(String, String)],
) {
    let mut lines = String::from("\n# pgq-test-support\n");
    let sockets = sockets.display().to_string();
    let mut all: Vec<(&str, &str)> = BASE_SETTINGS.to_vec();
    all.push(("unix_socket_directories", &sockets));
    let tls_paths = tls.map(|tls| {
        (
            tls.server_cert.display().to_string(),
            tls.server_key.display().to_string(),
        )
    });
    if let Some((cert, key)) = &tls_paths {
        all.extend([
            ("ssl", "on"),
            ("ssl_cert_file", cert),
            ("ssl_key_file", key),
        ]);
    }
    all.extend(settings.iter().map(|(n, v)| (n.as_str(), v.as_str())));
    for (name, value) in all {
        assert!(
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.'),
            "{name:?} is not a PostgreSQL setting name"
        );
        assert!(
            !value.contains('\n'),
            "the value of {name} spans lines: {value:?}"
        );
        lines.push_str(&format!("{name} = '{}'\n", value.replace('\'', "''")));
    }
    let conf = data.join("postgresql.conf");
    File::options()
        .append(true)
        .open(&conf)
        .and_then(|mut file| file.write_all(lines.as_bytes()))
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", conf.display()));

    let hba = data.join("pg_hba.conf");
    let rules = format!(
        "# pgq-test-support\n\
         local all all trust\n\
         host all +{PASSWORD_GROUP} 127.0.0.1/32 md5\n\
         host all all 127.0.0.1/32 trust\n"
    );
    std::fs::write(&hba, rules)
        .unwrap_or_else(|err| panic!("cannot write {}: {err}", hba.display()));
}
