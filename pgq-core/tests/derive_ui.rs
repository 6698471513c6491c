//! `#[derive(Task)]`: every attribute error, and every key compiled and run; the misuses of
//! `#[pgq_testkit::test]`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/ui-pass/*.rs");
}
