//! pgq-test-support against the real servers: PostgreSQL clusters, the proxy, PgBouncer.

mod cluster;
mod pgbouncer;
mod proxy;
mod support;
mod tls;

#[test]
fn handles_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<pgq_test_support::Cluster>();
    send_sync::<pgq_test_support::TcpProxy>();
    send_sync::<pgq_test_support::PgBouncer>();
}
