//! The derive crate checks `#[task(...)]` values against its own copies of `pgq_core::limits`
//! (a proc-macro crate cannot import them): each copy must equal the original.

use std::collections::HashMap;

use pgq_core::limits;

/// `NAME = value` for every `const` in the derive crate's limits file.
fn macro_limits() -> HashMap<String, i128> {
    let source = include_str!("../../pgq-macros/src/limits.rs");
    source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("pub(crate) const "))
        .map(|rest| {
            let (name, rest) = rest.split_once(':').expect("NAME: type = value;");
            let (_, value) = rest.split_once('=').expect("NAME: type = value;");
            let value = value.trim().trim_end_matches(';').replace('_', "");
            let value = value.parse().unwrap_or_else(|_| panic!("{name} = {value}"));
            (name.trim().to_owned(), value)
        })
        .collect()
}

#[test]
fn the_derive_checks_the_same_limits_as_the_runtime() {
    let millis = |d: std::time::Duration| d.as_millis() as i128;
    let expected: HashMap<&str, i128> = HashMap::from([
        ("MIN_PRIORITY", i128::from(limits::MIN_PRIORITY)),
        ("MAX_PRIORITY", i128::from(limits::MAX_PRIORITY)),
        ("MAX_MAX_ATTEMPTS", i128::from(limits::MAX_MAX_ATTEMPTS)),
        ("MAX_CONCURRENCY", i128::from(limits::MAX_CONCURRENCY)),
        ("MAX_QUEUE_LEN", limits::MAX_QUEUE_LEN as i128),
        ("MAX_TASK_NAME_LEN", limits::MAX_TASK_NAME_LEN as i128),
        ("MIN_LEASE_MILLIS", millis(limits::MIN_LEASE)),
        ("MAX_LEASE_MILLIS", millis(limits::MAX_LEASE)),
        ("MAX_TIMEOUT_MILLIS", millis(limits::MAX_TIMEOUT)),
    ]);
    let copies = macro_limits();
    assert_eq!(
        copies.len(),
        expected.len(),
        "every copy is pinned: {copies:?}"
    );
    for (name, value) in expected {
        assert_eq!(copies.get(name), Some(&value), "{name}");
    }
}
