//! What `#[pgq_testkit::test]` expands to: a runtime, a migrated database of the test's own,
//! and the test's body given it.

use std::future::Future;

use pgq_core::Client;

use crate::database::TestDatabase;

/// What a `#[pgq_testkit::test]` function may take as its one argument.
#[diagnostic::on_unimplemented(
    message = "a #[pgq_testkit::test] takes a `TestDatabase` or a `Client`, not `{Self}`"
)]
pub trait TestArgument: Sized {
    /// The argument, and the database to keep alive until the test ends when the argument
    /// does not own it.
    fn from_database(db: TestDatabase) -> (Self, Option<TestDatabase>);
}

impl TestArgument for TestDatabase {
    fn from_database(db: TestDatabase) -> (Self, Option<TestDatabase>) {
        (db, None)
    }
}

impl TestArgument for Client {
    fn from_database(db: TestDatabase) -> (Self, Option<TestDatabase>) {
        (db.client(), Some(db))
    }
}

/// Runs `body` on a multi-threaded runtime of its own (so that a worker runs beside the test),
/// with a new migrated database; the database is dropped when the test ends, pass or fail.
pub fn run_test<A, F, Fut>(body: F) -> Fut::Output
where
    A: TestArgument,
    F: FnOnce(A) -> Fut,
    Fut: Future,
{
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|err| panic!("cannot start the test's runtime: {err}"));
    runtime.block_on(async {
        let (argument, _kept) = A::from_database(TestDatabase::new().await);
        body(argument).await
    })
}
