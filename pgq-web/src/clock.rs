//! Times and durations as an operator reads them: `3m 12s ago`, with the exact time kept for a
//! tooltip.

use std::time::Duration;

use chrono::{DateTime, Utc};
use maud::{Markup, html};

/// A duration in its two largest units: `850ms`, `42s`, `3m 12s`, `5h 02m`, `2d 03h`.
pub(crate) fn duration(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0 => format!("{}ms", d.as_millis()),
        1..60 => format!("{secs}s"),
        60..3600 => format!("{}m {:02}s", secs / 60, secs % 60),
        3600..86400 => format!("{}h {:02}m", secs / 3600, (secs % 3600) / 60),
        _ => format!("{}d {:02}h", secs / 86400, (secs % 86400) / 3600),
    }
}

/// The exact time, to the second, in UTC.
pub(crate) fn exact(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// `at` relative to `now` (`3m 12s ago`, `in 40s`, `now`), in a `<time>` with the exact time.
pub(crate) fn relative(at: DateTime<Utc>, now: DateTime<Utc>) -> Markup {
    let text = match (now - at).to_std() {
        // Neither past nor to come: "0ms ago" would read as already done.
        Ok(Duration::ZERO) => "now".to_owned(),
        Ok(past) => format!("{} ago", duration(past)),
        Err(_) => format!("in {}", duration((at - now).to_std().unwrap_or_default())),
    };
    html! { time datetime=(at.to_rfc3339()) title=(exact(at)) { (text) } }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::{TimeDelta, Utc};

    use super::{duration, relative};

    #[test]
    fn durations_read_in_two_units() {
        assert_eq!(duration(Duration::from_millis(850)), "850ms");
        assert_eq!(duration(Duration::from_secs(42)), "42s");
        assert_eq!(duration(Duration::from_secs(192)), "3m 12s");
        assert_eq!(duration(Duration::from_secs(5 * 3600 + 120)), "5h 02m");
        assert_eq!(
            duration(Duration::from_secs(2 * 86400 + 3 * 3600)),
            "2d 03h"
        );
    }

    #[test]
    fn an_instant_is_past_to_come_or_now() {
        let now = Utc::now();
        let said = |at| relative(at, now).into_string();
        assert!(said(now - TimeDelta::seconds(42)).contains(">42s ago<"));
        assert!(said(now + TimeDelta::seconds(40)).contains(">in 40s<"));
        assert!(said(now).contains(">now<"));
    }
}
