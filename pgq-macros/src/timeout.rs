//! `timeout = "30s"`: a positive whole number and one unit, at most a day.

use std::fmt;

/// The longest timeout `#[task(timeout = ..)]` accepts: 24 hours.
const MAX_MILLIS: u64 = 24 * 60 * 60 * 1000;

/// Why a timeout string was rejected.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum TimeoutError {
    /// Not digits followed by exactly one of `ms`, `s`, `m`, `h`.
    Format,
    /// `"0s"` and friends.
    Zero,
    /// More than 24 hours.
    TooLong,
}

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Format => {
                "timeout must be a positive whole number followed by one unit, `ms`, `s`, `m` \
                 or `h`: for example \"500ms\", \"30s\", \"5m\" or \"1h\""
            }
            Self::Zero => "timeout must be greater than zero",
            Self::TooLong => "timeout must be at most 24h",
        })
    }
}

/// The timeout in milliseconds.
pub(crate) fn parse_millis(text: &str) -> Result<u64, TimeoutError> {
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(digits_end);
    let millis_per_unit = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(TimeoutError::Format),
    };
    if digits.is_empty() {
        return Err(TimeoutError::Format);
    }
    // Only ASCII digits are left, so parsing can fail only by overflowing.
    let count: u64 = digits.parse().map_err(|_| TimeoutError::TooLong)?;
    if count == 0 {
        return Err(TimeoutError::Zero);
    }
    match count.checked_mul(millis_per_unit) {
        Some(millis) if millis <= MAX_MILLIS => Ok(millis),
        _ => Err(TimeoutError::TooLong),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_unit() {
        assert_eq!(parse_millis("500ms"), Ok(500));
        assert_eq!(parse_millis("30s"), Ok(30_000));
        assert_eq!(parse_millis("5m"), Ok(300_000));
        assert_eq!(parse_millis("1h"), Ok(3_600_000));
        assert_eq!(parse_millis("007s"), Ok(7_000));
    }

    #[test]
    fn up_to_a_day() {
        assert_eq!(parse_millis("24h"), Ok(86_400_000));
        assert_eq!(parse_millis("1440m"), Ok(86_400_000));
        assert_eq!(parse_millis("86400000ms"), Ok(86_400_000));
        assert_eq!(parse_millis("86400001ms"), Err(TimeoutError::TooLong));
        assert_eq!(parse_millis("25h"), Err(TimeoutError::TooLong));
        assert_eq!(
            parse_millis("99999999999999999999999h"),
            Err(TimeoutError::TooLong)
        );
        assert_eq!(
            parse_millis("18446744073709551615h"),
            Err(TimeoutError::TooLong)
        );
    }

    #[test]
    fn zero_is_rejected() {
        assert_eq!(parse_millis("0s"), Err(TimeoutError::Zero));
        assert_eq!(parse_millis("000ms"), Err(TimeoutError::Zero));
    }

    #[test]
    fn malformed() {
        for text in [
            "", "30", "s", "30 s", " 30s", "30s ", "30S", "30sec", "1h30m", "1.5s", "-1s", "+1s",
            "30us", "1d", "٣s",
        ] {
            assert_eq!(parse_millis(text), Err(TimeoutError::Format), "{text:?}");
        }
    }

    #[test]
    fn the_format_message_shows_examples() {
        let message = TimeoutError::Format.to_string();
        assert!(
            message.contains("\"500ms\", \"30s\", \"5m\" or \"1h\""),
            "{message}"
        );
    }
}
