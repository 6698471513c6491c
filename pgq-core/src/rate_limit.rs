//! [`RateLimit`]: so many job starts per period for a queue, across all workers, in bursts of up
//! to that many.

use std::fmt;
use std::time::Duration;

use crate::limits;

/// [`jobs`](Self::jobs) job starts per [`period`](Self::period) for a queue, across all workers,
/// set with [`Client::set_queue_rate`](crate::Client::set_queue_rate). A token bucket in
/// the queue's row holds up to `jobs` tokens, refills continuously at `jobs` per `period`, and
/// each job claimed takes one: a burst of up to `jobs` after a quiet spell, then the rate, so one
/// window of `period` right after a quiet spell can see up to about twice `jobs` starts.
///
/// ```
/// use std::time::Duration;
/// use pgq_core::RateLimit;
///
/// let rate = RateLimit::new(20, Duration::from_secs(1)).unwrap();
/// assert_eq!(rate.to_string(), "20/1s");
/// assert_eq!("100/m".parse::<RateLimit>().unwrap(), RateLimit::new(100, Duration::from_secs(60)).unwrap());
/// assert!(RateLimit::new(0, Duration::from_secs(1)).is_none());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    jobs: u32,
    period: Duration,
}

impl RateLimit {
    /// `jobs` starts per `period`; `None` unless `jobs` is 1 to `i32::MAX` and `period` is 1 ms
    /// to [`MAX_RATE_PERIOD`](crate::limits::MAX_RATE_PERIOD). A period is kept in whole
    /// milliseconds, rounded up: never more starts than asked for.
    ///
    /// ```
    /// let rate = pgq_core::RateLimit::new(5, std::time::Duration::from_millis(500));
    /// assert!(rate.is_some());
    /// ```
    pub fn new(jobs: u32, period: Duration) -> Option<Self> {
        let jobs_ok = jobs >= 1 && i32::try_from(jobs).is_ok();
        let period_ok = period >= Duration::from_millis(1) && period <= limits::MAX_RATE_PERIOD;
        let period =
            Duration::from_millis(u64::try_from(period.as_nanos().div_ceil(1_000_000)).ok()?);
        (jobs_ok && period_ok).then_some(Self { jobs, period })
    }

    /// The rate a queue's row holds, as the claims enforce it: at least one job per at least a
    /// millisecond, whatever longer period a hand-written `UPDATE` gave it.
    pub(crate) fn stored(jobs: u32, period_ms: i64) -> Option<Self> {
        let period = Duration::from_millis(u64::try_from(period_ms).ok()?);
        (jobs >= 1 && period >= Duration::from_millis(1)).then_some(Self { jobs, period })
    }

    /// How many job starts a period allows.
    ///
    /// ```
    /// assert_eq!("20/s".parse::<pgq_core::RateLimit>().unwrap().jobs(), 20);
    /// ```
    pub fn jobs(&self) -> u32 {
        self.jobs
    }

    /// The period.
    ///
    /// ```
    /// let rate = "20/h".parse::<pgq_core::RateLimit>().unwrap();
    /// assert_eq!(rate.period(), std::time::Duration::from_secs(3600));
    /// ```
    pub fn period(&self) -> Duration {
        self.period
    }

    pub(crate) fn period_ms(&self) -> i64 {
        i64::try_from(self.period.as_millis()).unwrap_or(i64::MAX)
    }
}

impl fmt::Display for RateLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let millis = self.period.as_millis();
        if millis.is_multiple_of(1000) {
            write!(f, "{}/{}s", self.jobs, millis / 1000)
        } else {
            write!(f, "{}/{}ms", self.jobs, millis)
        }
    }
}

impl std::str::FromStr for RateLimit {
    type Err = String;

    /// `N/s`, `N/m`, `N/h`, or `N/` a number with `ms`, `s`, `m` or `h` (`20/s`, `5/500ms`).
    fn from_str(text: &str) -> Result<Self, String> {
        let refuse =
            || format!("{text:?} is not a rate: use N/s, N/m, N/h or N/<duration> such as 5/500ms");
        let (jobs, per) = text.split_once('/').ok_or_else(refuse)?;
        let jobs: u32 = jobs.trim().parse().map_err(|_| refuse())?;
        let per = per.trim();
        let unit_start = per.find(|c: char| !c.is_ascii_digit()).ok_or_else(refuse)?;
        let (count, unit) = per.split_at(unit_start);
        let count: u64 = if count.is_empty() {
            1
        } else {
            count.parse().map_err(|_| refuse())?
        };
        let period = match unit {
            "ms" => Duration::from_millis(count),
            "s" => Duration::from_secs(count),
            "m" => Duration::from_secs(count.saturating_mul(60)),
            "h" => Duration::from_secs(count.saturating_mul(3600)),
            _ => return Err(refuse()),
        };
        Self::new(jobs, period).ok_or_else(refuse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kept in whole milliseconds, rounded up: 1.999 ms was kept as 1 ms, almost twice the rate.
    #[test]
    fn a_fractional_period_rounds_up() {
        let rate = RateLimit::new(1, Duration::from_micros(1999)).unwrap();
        assert_eq!(rate.period(), Duration::from_millis(2));
        assert_eq!(
            (rate.period_ms(), rate.to_string()),
            (2, "1/2ms".to_owned())
        );
    }

    #[test]
    fn rates_parse_and_print() {
        let rate: RateLimit = "5/500ms".parse().unwrap();
        assert_eq!(
            (rate.jobs(), rate.period()),
            (5, Duration::from_millis(500))
        );
        assert_eq!(rate.to_string(), "5/500ms");
        assert_eq!("3/2m".parse::<RateLimit>().unwrap().to_string(), "3/120s");
        for bad in ["", "20", "0/s", "20/", "20/x", "-1/s", "20/0s", "1/25h"] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad:?}");
        }
    }
}
