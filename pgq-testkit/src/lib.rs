//! Test helpers for pgq users and for pgq itself.
//!
//! [`TestDatabase`] gives each test its own freshly migrated PostgreSQL database, so tests run
//! in parallel without seeing each other's jobs.

mod database;

pub use database::{DEFAULT_DATABASE_URL, TestDatabase};
