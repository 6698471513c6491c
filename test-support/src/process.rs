//! Running server programs, as the `postgres` OS account when the tests run as root.
//!
//! PostgreSQL's programs and PgBouncer refuse to run as root. When the test process is root, every
//! server program runs as the `postgres` account (its uid and gid set on the command, with no
//! supplementary groups) and the directories it writes are handed to that account; otherwise
//! they run as the test's own user.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The account server programs run as when the tests run as root.
const SERVER_ACCOUNT: &str = "postgres";

/// How often waits for a process check on it.
const POLL: Duration = Duration::from_millis(20);

/// Environment variables of libpq and the server programs that must not steer a test's servers.
const CLEARED_ENV: [&str; 5] = ["PGDATA", "PGPORT", "PGHOST", "PGUSER", "PGOPTIONS"];

/// The OS account server programs run as.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServerUser {
    /// uid and gid to switch to; `None` runs programs as the test's own user.
    ids: Option<(u32, u32)>,
}

impl ServerUser {
    /// `postgres` when the test process is root, the test's own user otherwise.
    pub(crate) fn get() -> Self {
        static USER: OnceLock<ServerUser> = OnceLock::new();
        *USER.get_or_init(|| {
            // The owner of /proc/self is the process's effective uid.
            let uid = std::fs::metadata("/proc/self")
                .unwrap_or_else(|err| {
                    panic!("cannot read /proc/self to learn the test's uid: {err}")
                })
                .uid();
            if uid != 0 {
                return Self { ids: None };
            }
            let passwd = std::fs::read_to_string("/etc/passwd")
                .unwrap_or_else(|err| panic!("cannot read /etc/passwd: {err}"));
            let ids = passwd.lines().find_map(|line| {
                let fields: Vec<&str> = line.split(':').collect();
                match fields.as_slice() {
                    [name, _, uid, gid, ..] if *name == SERVER_ACCOUNT => {
                        Some((uid.parse().ok()?, gid.parse().ok()?))
                    }
                    _ => None,
                }
            });
            match ids {
                Some(ids) => Self { ids: Some(ids) },
                None => panic!(
                    "the tests run as root, and PostgreSQL refuses root: there is no \
                     {SERVER_ACCOUNT:?} OS account to run servers as (installing the postgresql \
                     package creates it), or run the tests as an ordinary user"
                ),
            }
        })
    }

    /// A command for `program` that runs as this user in `dir`, free of libpq's environment.
    pub(crate) fn command(self, program: impl AsRef<OsStr>, dir: &Path) -> Command {
        let mut command = Command::new(program);
        command.current_dir(dir);
        for name in CLEARED_ENV {
            command.env_remove(name);
        }
        if let Some((uid, gid)) = self.ids {
            command.uid(uid).gid(gid);
        }
        command
    }

    /// Hands `path` to this user (a no-op when programs run as the test's own user).
    pub(crate) fn own(self, path: &Path) {
        if let Some((uid, gid)) = self.ids {
            std::os::unix::fs::chown(path, Some(uid), Some(gid))
                .unwrap_or_else(|err| panic!("cannot hand {} to uid {uid}: {err}", path.display()));
        }
    }
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`: `PGQ_PG_BINDIR` when set, otherwise
/// what `pg_config --bindir` says.
pub(crate) fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Some(dir) = std::env::var_os("PGQ_PG_BINDIR") {
            return PathBuf::from(dir);
        }
        let output = Command::new("pg_config")
            .arg("--bindir")
            .output()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot run pg_config to find PostgreSQL's server programs ({err}): install \
                 PostgreSQL (apt-get install postgresql) or set PGQ_PG_BINDIR to the directory \
                 holding initdb"
                )
            });
        assert!(
            output.status.success(),
            "pg_config --bindir failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
    })
}

/// Runs a short-lived command to its end; panics with its output when it fails.
pub(crate) async fn run(command: Command, what: &str) -> Output {
    let output = tokio::process::Command::from(command)
        .output()
        .await
        .unwrap_or_else(|err| panic!("cannot start {what}: {err}"));
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A log file's length, where the next start's lines will begin.
pub(crate) fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

/// What a log file holds from byte `from` on (its last 60 lines at most).
pub(crate) fn log_since(path: &Path, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path)
        && file.seek(SeekFrom::Start(from)).is_ok()
    {
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

/// Waits, for `limit` at most, until a child that was told to exit, or killed, has exited.
pub(crate) async fn reap(mut child: Child, what: &str, limit: Duration) {
    let deadline = Instant::now() + limit;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return,
            Ok(None) if Instant::now() < deadline => tokio::time::sleep(POLL).await,
            Ok(None) => panic!("{what} did not exit within {limit:?}"),
            Err(err) => panic!("cannot wait for {what}: {err}"),
        }
    }
}

/// How many live processes work in `data` (every server process does: the postmaster changes
/// into its data directory before it forks). Linux's `/proc` tells; elsewhere, none are seen.
pub(crate) fn server_processes(data: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|entry| std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd == data))
        .count()
}
