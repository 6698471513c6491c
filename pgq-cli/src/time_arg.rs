//! Times on the command line: a moment (RFC 3339, or a date at midnight UTC) or an age
//! (`90s`, `15m`, `2h`, `7d`: that long before now).

use std::sync::LazyLock;

use chrono::{DateTime, NaiveDate, TimeDelta, Utc};

/// The moment ages count back from, one for the whole command: `--created-after 1h
/// --created-before 1h` is the same empty range in either order.
static NOW: LazyLock<DateTime<Utc>> = LazyLock::new(Utc::now);

/// The moment `text` names.
pub(crate) fn parse_time(text: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        return Ok(at.with_timezone(&Utc));
    }
    if let Ok(day) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        return Ok(day.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc());
    }
    let age = parse_age(text).ok_or_else(|| {
        format!(
            "{text:?} is neither a time (2026-11-24T08:00:00Z, 2026-11-24) nor an age (90s, 15m, 2h, 7d)"
        )
    })?;
    NOW.checked_sub_signed(age)
        .ok_or_else(|| format!("{text:?} is too long ago"))
}

fn parse_age(text: &str) -> Option<TimeDelta> {
    // The unit is the last character, whatever its width in bytes.
    let (unit_at, _) = text.char_indices().next_back()?;
    let (number, unit) = text.split_at(unit_at);
    let number: i64 = number.parse().ok().filter(|n| *n >= 0)?;
    match unit {
        "s" => TimeDelta::try_seconds(number),
        "m" => TimeDelta::try_minutes(number),
        "h" => TimeDelta::try_hours(number),
        "d" => TimeDelta::try_days(number),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, Utc};

    use super::parse_time;

    #[test]
    fn moments_dates_and_ages_parse() {
        assert_eq!(
            parse_time("2026-11-24T08:00:00Z").unwrap().to_rfc3339(),
            "2026-11-24T08:00:00+00:00"
        );
        assert_eq!(
            parse_time("2026-11-24").unwrap().to_rfc3339(),
            "2026-11-24T00:00:00+00:00"
        );
        let hour_ago = parse_time("1h").unwrap();
        let expected = Utc::now() - TimeDelta::hours(1);
        assert!((hour_ago - expected).abs() < TimeDelta::seconds(5));
    }

    #[test]
    fn anything_else_says_what_is_expected() {
        for bad in [
            "",
            "h",
            "5x",
            "-5m",
            "yesterday",
            "2026-13-01",
            "99999999999999d",
            "é",
            "7д",
            "15m\u{a0}",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
    }
}
