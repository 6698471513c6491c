//! Queue names: what pgq accepts, checked before anything reaches the database.

use crate::error::{Error, Result};
use crate::limits;

/// Checks that `queue` is 1 to 64 ASCII letters, digits, `_`, `-`, `.` or `:`.
///
/// The same rule is a CHECK constraint on the jobs table, and `#[task(queue = ..)]` applies it
/// at compile time.
pub(crate) fn validate(queue: &str) -> Result<()> {
    if queue.is_empty() {
        return Err(Error::invalid_queue(queue, "must not be empty"));
    }
    if queue.chars().count() > limits::MAX_QUEUE_LEN {
        return Err(Error::invalid_queue(queue, "longer than 64 characters"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':');
    if !queue.chars().all(allowed) {
        return Err(Error::invalid_queue(
            queue,
            "only ASCII letters, digits, '_', '-', '.' and ':' are allowed",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn accepts_plain_names() {
        for name in [
            "default",
            "email",
            "reports.monthly",
            "a:b-c_d",
            &"q".repeat(64),
        ] {
            assert!(validate(name).is_ok(), "{name}");
        }
    }

    #[test]
    fn refuses_hostile_names() {
        let long = "q".repeat(200);
        for name in [
            "",
            "it's",
            "a;drop table x",
            "e\u{1F600}",
            "tab\t",
            " ",
            &long,
        ] {
            assert!(validate(name).is_err(), "{name:?}");
        }
    }
}
