//! `timeout = "30s"`, `lease = "5m"`: a positive whole number and one unit, at most a day.
//!
//! One parser for every duration key; [`Limits`] names the key for its messages and sets its
//! shortest value.

use std::fmt;

use crate::limits;

/// The rules of one duration key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Limits {
    /// The key as the user writes it, for error messages.
    pub(crate) key: &'static str,
    /// The shortest accepted duration; 1 accepts anything greater than zero.
    pub(crate) min_millis: u64,
    /// The longest accepted duration.
    pub(crate) max_millis: u64,
}

/// `timeout`: anything greater than zero.
pub(crate) const TIMEOUT: Limits = Limits {
    key: "timeout",
    min_millis: 1,
    max_millis: limits::MAX_TIMEOUT_MILLIS,
};

/// `lease`: as `WorkerBuilder::build` checks a worker's lease.
pub(crate) const LEASE: Limits = Limits {
    key: "lease",
    min_millis: limits::MIN_LEASE_MILLIS,
    max_millis: limits::MAX_LEASE_MILLIS,
};

/// Why a duration string was rejected.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct DurationError {
    /// The rules it broke, for the message.
    pub(crate) limits: Limits,
    pub(crate) kind: ErrorKind,
}

/// Which rule a duration string broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ErrorKind {
    /// Not digits followed by exactly one of `ms`, `s`, `m`, `h`.
    Format,
    /// Shorter than [`Limits::min_millis`]: `"0s"` and friends, or `"500ms"` for a lease.
    TooShort,
    /// Longer than [`Limits::max_millis`].
    TooLong,
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = self.limits.key;
        match self.kind {
            ErrorKind::Format => write!(
                f,
                "{key} must be a positive whole number followed by one unit, `ms`, `s`, `m` or \
                 `h`: for example \"500ms\", \"30s\", \"5m\" or \"1h\""
            ),
            ErrorKind::TooShort if self.limits.min_millis <= 1 => {
                write!(f, "{key} must be greater than zero")
            }
            ErrorKind::TooShort => write!(
                f,
                "{key} must be at least {}",
                Written(self.limits.min_millis)
            ),
            ErrorKind::TooLong => write!(
                f,
                "{key} must be at most {}",
                Written(self.limits.max_millis)
            ),
        }
    }
}

/// Milliseconds as the user would write them: the largest unit that divides them.
struct Written(u64);

impl fmt::Display for Written {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.0;
        let (count, unit) = [(3_600_000, "h"), (60_000, "m"), (1_000, "s")]
            .into_iter()
            .find(|&(per_unit, _)| millis != 0 && millis.is_multiple_of(per_unit))
            .map_or((millis, "ms"), |(per_unit, unit)| (millis / per_unit, unit));
        write!(f, "{count}{unit}")
    }
}

impl Limits {
    /// The duration in milliseconds.
    pub(crate) fn parse_millis(self, text: &str) -> Result<u64, DurationError> {
        let error = |kind| DurationError { limits: self, kind };
        let digits_end = text
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(digits_end);
        let millis_per_unit = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            _ => return Err(error(ErrorKind::Format)),
        };
        if digits.is_empty() {
            return Err(error(ErrorKind::Format));
        }
        // Only ASCII digits are left, so parsing can fail only by overflowing.
        let count: u64 = digits.parse().map_err(|_| error(ErrorKind::TooLong))?;
        match count.checked_mul(millis_per_unit) {
            Some(millis) if millis < self.min_millis.max(1) => Err(error(ErrorKind::TooShort)),
            Some(millis) if millis <= self.max_millis => Ok(millis),
            _ => Err(error(ErrorKind::TooLong)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(limits: Limits, text: &str) -> Result<u64, ErrorKind> {
        limits.parse_millis(text).map_err(|err| {
            assert_eq!(err.limits, limits);
            err.kind
        })
    }

    fn message(limits: Limits, text: &str) -> String {
        limits.parse_millis(text).unwrap_err().to_string()
    }

    #[test]
    fn each_unit() {
        for limits in [TIMEOUT, LEASE] {
            assert_eq!(kind(limits, "1500ms"), Ok(1_500));
            assert_eq!(kind(limits, "30s"), Ok(30_000));
            assert_eq!(kind(limits, "5m"), Ok(300_000));
            assert_eq!(kind(limits, "1h"), Ok(3_600_000));
            assert_eq!(kind(limits, "007s"), Ok(7_000));
        }
        assert_eq!(kind(TIMEOUT, "500ms"), Ok(500));
    }

    #[test]
    fn up_to_a_day() {
        for limits in [TIMEOUT, LEASE] {
            assert_eq!(kind(limits, "24h"), Ok(86_400_000));
            assert_eq!(kind(limits, "1440m"), Ok(86_400_000));
            assert_eq!(kind(limits, "86400000ms"), Ok(86_400_000));
            assert_eq!(kind(limits, "86400001ms"), Err(ErrorKind::TooLong));
            assert_eq!(kind(limits, "25h"), Err(ErrorKind::TooLong));
            assert_eq!(
                kind(limits, "99999999999999999999999h"),
                Err(ErrorKind::TooLong)
            );
            assert_eq!(
                kind(limits, "18446744073709551615h"),
                Err(ErrorKind::TooLong)
            );
        }
        assert_eq!(message(TIMEOUT, "25h"), "timeout must be at most 24h");
        assert_eq!(message(LEASE, "25h"), "lease must be at most 24h");
    }

    #[test]
    fn a_timeout_above_zero() {
        assert_eq!(kind(TIMEOUT, "1ms"), Ok(1));
        assert_eq!(kind(TIMEOUT, "0s"), Err(ErrorKind::TooShort));
        assert_eq!(kind(TIMEOUT, "000ms"), Err(ErrorKind::TooShort));
        assert_eq!(message(TIMEOUT, "0s"), "timeout must be greater than zero");
    }

    #[test]
    fn a_lease_of_at_least_a_second() {
        assert_eq!(kind(LEASE, "1s"), Ok(1_000));
        assert_eq!(kind(LEASE, "1000ms"), Ok(1_000));
        for text in ["999ms", "500ms", "1ms", "0s", "0h", "000ms"] {
            assert_eq!(kind(LEASE, text), Err(ErrorKind::TooShort), "{text:?}");
            assert_eq!(
                message(LEASE, text),
                "lease must be at least 1s",
                "{text:?}"
            );
        }
    }

    #[test]
    fn malformed() {
        for limits in [TIMEOUT, LEASE] {
            for text in [
                "", "30", "s", "30 s", " 30s", "30s ", "30S", "30sec", "1h30m", "1.5s", "-1s",
                "+1s", "30us", "1d", "٣s",
            ] {
                assert_eq!(kind(limits, text), Err(ErrorKind::Format), "{text:?}");
            }
        }
    }

    #[test]
    fn messages_name_the_key() {
        let expected = |key: &str| {
            format!(
                "{key} must be a positive whole number followed by one unit, `ms`, `s`, `m` or \
                 `h`: for example \"500ms\", \"30s\", \"5m\" or \"1h\""
            )
        };
        assert_eq!(message(TIMEOUT, "soon"), expected("timeout"));
        assert_eq!(message(LEASE, "soon"), expected("lease"));
    }

    #[test]
    fn limits_are_written_in_the_largest_whole_unit() {
        let written = |millis| Written(millis).to_string();
        assert_eq!(written(limits::MAX_LEASE_MILLIS), "24h");
        assert_eq!(written(1_000), "1s");
        assert_eq!(written(90_000), "90s");
        assert_eq!(written(120_000), "2m");
        assert_eq!(written(1_500), "1500ms");
        assert_eq!(written(0), "0ms");
    }
}
