//! Test databases that a killed test process left behind: a process that ends without running
//! its drops (a SIGKILL, a test runner's timeout, `panic = "abort"`) cannot drop its databases.
//! The first [`TestDatabase`](crate::TestDatabase) of each process drops those whose process is
//! gone.
//!
//! A database goes only when all of these hold, so that no running test loses its own: the server
//! is on this machine (a process id means nothing on another), the name is a test database's
//! (`pgq_test_<pid>_<n>_<nanos>`, or one a test made from it with a suffix that starts with a
//! letter, `pgq_test_<pid>_<n>_<nanos>_latin1`) of another process, no process with that id runs
//! here, and no session is connected to it — PostgreSQL refuses the drop if one connects
//! meanwhile.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use pgq_core::__testkit;
use sqlx::postgres::PgConnectOptions;

/// The start of every test database's name.
pub(crate) const PREFIX: &str = "pgq_test_";

/// Whether this process has swept already.
static SWEPT: AtomicBool = AtomicBool::new(false);

/// Drops the test databases of processes that are gone, once per process. Best effort: a
/// failure leaves them, and the test goes on.
pub(crate) async fn sweep_once(server: &PgConnectOptions) {
    if SWEPT.swap(true, Ordering::Relaxed) || !on_this_machine(server) || !processes_visible() {
        return;
    }
    let Ok(names) = __testkit::idle_databases(server, PREFIX).await else {
        return;
    };
    let own = std::process::id();
    for name in names {
        let Some(pid) = owner(&name) else { continue };
        if pid != own && !running(pid) {
            let _ = __testkit::drop_idle_database(server, &name).await;
        }
    }
}

/// The process id in a test database's name, if `name` is one.
fn owner(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(PREFIX)?.splitn(4, '_');
    let pid = parts.next()?.parse().ok()?;
    let numbered = parts
        .by_ref()
        .take(2)
        .filter(|p| p.parse::<u64>().is_ok())
        .count();
    let derived = parts
        .next()
        .is_none_or(|suffix| suffix.starts_with(|c: char| c.is_ascii_alphabetic()));
    (numbered == 2 && derived).then_some(pid)
}

/// Whether the server runs on this machine: a Unix socket or a loopback address.
fn on_this_machine(server: &PgConnectOptions) -> bool {
    let host = server.get_host();
    server.get_socket().is_some()
        || host.starts_with('/')
        || matches!(host, "localhost" | "127.0.0.1" | "::1" | "[::1]")
}

/// Whether this system lists its processes in `/proc` (Linux); elsewhere nothing is swept.
fn processes_visible() -> bool {
    Path::new("/proc/self").exists()
}

fn running(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_test_databases_name_has_an_owner() {
        assert_eq!(owner("pgq_test_4242_0_123456789"), Some(4242));
        assert_eq!(owner("pgq_test_4242_17_0"), Some(4242));
        assert_eq!(owner("pgq_test_4242_0"), None);
        assert_eq!(owner("pgq_test_4242_0_1_2"), None);
        assert_eq!(owner("pgq_test_4242_0_1_latin1"), Some(4242));
        assert_eq!(owner("pgq_test_4242_0_latin1"), None);
        assert_eq!(owner("pgq_test_x_0_1"), None);
        assert_eq!(owner("pgq_test_4242_a_1"), None);
        assert_eq!(owner("pgq_bench_4242"), None);
        assert_eq!(owner("app_pgq_test_4242_0_1"), None);
    }

    #[test]
    fn only_a_server_on_this_machine_is_swept() {
        let at = |url: &str| on_this_machine(&url.parse().unwrap());
        assert!(at("postgres://postgres@127.0.0.1:5432/postgres"));
        assert!(at("postgres://postgres@localhost/postgres"));
        assert!(at("postgres://postgres@[::1]:5432/postgres"));
        assert!(at("postgres:///postgres?host=/var/run/postgresql"));
        assert!(!at("postgres://postgres@db.internal:5432/postgres"));
        assert!(!at("postgres://postgres@10.0.0.7/postgres"));
    }
}
