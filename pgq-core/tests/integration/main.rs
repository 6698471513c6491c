//! Integration tests against a real PostgreSQL: one module per feature, one binary so the
//! suite links once. Each test gets its own database from `pgq_testkit::TestDatabase`.

mod support;

mod admin_actions;
mod admin_search;
mod bad_rows;
mod cancel;
mod concurrency_key;
mod connections;
mod dead_network;
mod enqueue;
mod enqueue_many;
mod fencing;
mod hostile_input;
mod lease;
mod least_privilege;
mod migrate;
mod overrun;
mod pause;
mod pgbouncer;
mod progress;
mod queue_limit;
mod rate_limit;
mod registry;
mod retention;
mod schedules;
mod schema_name;
mod search_path;
mod server_language;
mod stats;
mod tags;
mod tls;
mod transitions;
mod unique_key;
mod worker_bad_input;
mod worker_build;
mod worker_claim;
mod worker_exactly_once;
mod worker_handler;
mod worker_outcomes;
mod worker_shutdown;
mod worker_wakeup;
mod worker_writes;
mod workers;
