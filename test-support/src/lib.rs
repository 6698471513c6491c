//! Hostile conditions for pgq's own integration tests, on real servers, never mocks.
//!
//! - [`Cluster`]: a throwaway PostgreSQL cluster of its own (`initdb` in a temporary directory,
//!   a free port, optional TLS) that a test stops, restarts, or kills as a crash would.
//! - [`TcpProxy`]: a TCP proxy in the test's runtime whose network the test breaks: connections
//!   reset, or blackholed as by a dead route.
//! - [`PgBouncer`]: a real `pgbouncer` process in front of a server, in transaction pooling by
//!   default.
//!
//! They compose: a [`PgBouncer`] in front of a [`TcpProxy`] in front of a [`Cluster`] breaks
//! the network between PgBouncer and the server.
//!
//! ```no_run
//! # async fn example() {
//! use pgq_test_support::{Cluster, PgBouncer, ProxyMode, TcpProxy};
//!
//! let cluster = Cluster::new().await;
//! let proxy = TcpProxy::new(cluster.addr()).await;
//! let bouncer = PgBouncer::new(proxy.addr()).await;
//! let pool = sqlx::PgPool::connect_with(bouncer.connect_options(&cluster.connect_options()))
//!     .await
//!     .unwrap();
//! proxy.set_mode(ProxyMode::Blackhole); // PgBouncer's server connections hang
//! # }
//! ```
//!
//! Servers need PostgreSQL's server programs (found with `pg_config --bindir`, or in
//! `PGQ_PG_BINDIR`), `openssl` for TLS clusters and `pgbouncer` for [`PgBouncer`]; a missing one
//! fails the test with what to install. PostgreSQL and PgBouncer refuse to run as root: when the
//! tests run as root, the servers run as the `postgres` OS account, which owns their
//! directories. Each server lives in a new directory under the temporary directory (`TMPDIR`),
//! removed with it. The crate reads `/proc`, so it runs on Linux.

mod certificate;
mod cluster;
mod cluster_options;
mod pgbouncer;
mod port;
mod process;
mod proxy;
mod scratch;

pub use cluster::{Cluster, SUPERUSER};
pub use cluster_options::{ClusterOptions, PASSWORD_GROUP};
pub use pgbouncer::{
    DEFAULT_IGNORE_STARTUP_PARAMETERS, DEFAULT_MAX_PREPARED_STATEMENTS, PgBouncer,
    PgBouncerOptions, PoolMode,
};
pub use proxy::{ProxyMode, TcpProxy};
