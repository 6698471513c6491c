//! Integration tests against a real PostgreSQL: one module per feature, one binary so the
//! suite links once. Each test gets its own database from `pgq_testkit::TestDatabase`.

mod enqueue;
mod enqueue_many;
mod migrate;
mod registry;
mod transitions;
mod unique_key;
