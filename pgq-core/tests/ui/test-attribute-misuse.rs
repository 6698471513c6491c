use pgq_testkit::TestDatabase;

#[pgq_testkit::test]
fn not_async(db: TestDatabase) {
    drop(db);
}

#[pgq_testkit::test]
async fn two_arguments(db: TestDatabase, other: TestDatabase) {
    drop((db, other));
}

#[pgq_testkit::test]
async fn no_argument() {}

#[pgq_testkit::test(inline)]
async fn with_arguments(db: TestDatabase) {
    drop(db);
}

fn main() {}
