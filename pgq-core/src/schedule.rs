//! [`Schedule`]: when a periodic task is enqueued — a cron expression read in a time zone — and
//! what becomes of the instants missed while no worker ran ([`Missed`]). The instant arithmetic
//! and the missed-instant policy are here too, as pure functions of the database's clock.

use std::fmt;
use std::str::FromStr as _;
use std::time::Duration;

use chrono::{DateTime, TimeZone as _, Utc};

use crate::limits;

/// When a periodic task is enqueued: a cron expression with seconds (`"0 */5 * * * *"`: every
/// five minutes; five fields mean second 0), read in a time zone (UTC unless
/// [`time_zone`](Self::time_zone) names one), and a policy for instants missed while no
/// worker ran. Given to [`WorkerBuilder::periodic`](crate::WorkerBuilder::periodic) with the
/// task to enqueue; `build()` checks it.
///
/// ```no_run
/// # use pgq_core::{Missed, Schedule, Task};
/// # #[derive(serde::Serialize, serde::Deserialize, Task)] struct SendDigest { hour: u32 }
/// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
/// let nine_in_paris = Schedule::cron("0 0 9 * * MON-FRI")
///     .time_zone("Europe/Paris")
///     .missed(Missed::RunOnce)
///     .name("weekday-digest");
/// let worker = pgq_core::Worker::builder(client)
///     .queue("email", 4)
///     .periodic(nine_in_paris, || SendDigest { hour: 9 })
///     .build()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Schedule {
    pub(crate) cron: String,
    pub(crate) time_zone: String,
    pub(crate) missed: Missed,
    pub(crate) name: Option<String>,
}

impl Schedule {
    /// A schedule from a cron expression: six fields with seconds first (`sec min hour
    /// day-of-month month day-of-week`), or the classic five with second 0. Checked by
    /// `build()`, which refuses one that does not parse with
    /// [`Error::InvalidSchedule`](crate::Error::InvalidSchedule).
    ///
    /// ```
    /// let every_second = pgq_core::Schedule::cron("* * * * * *");
    /// let hourly = pgq_core::Schedule::cron("0 * * * *"); // minute 0, second 0
    /// # let _ = (every_second, hourly);
    /// ```
    pub fn cron(expression: impl Into<String>) -> Self {
        Self {
            cron: expression.into(),
            time_zone: "UTC".into(),
            missed: Missed::default(),
            name: None,
        }
    }

    /// The IANA time zone the expression is read in (`"Europe/Paris"`, `"America/New_York"`),
    /// daylight saving included: an instant that a clock change skips does not happen, and one
    /// it repeats happens once. UTC by default.
    ///
    /// ```
    /// let schedule = pgq_core::Schedule::cron("0 30 8 * * *").time_zone("Asia/Tokyo");
    /// # let _ = schedule;
    /// ```
    pub fn time_zone(mut self, zone: impl Into<String>) -> Self {
        self.time_zone = zone.into();
        self
    }

    /// What becomes of instants missed while no worker ran ([`Missed::Skip`] by default).
    ///
    /// ```
    /// use pgq_core::{Missed, Schedule};
    /// let schedule = Schedule::cron("0 0 * * * *").missed(Missed::Backfill(24));
    /// # let _ = schedule;
    /// ```
    pub fn missed(mut self, missed: Missed) -> Self {
        self.missed = missed;
        self
    }

    /// The schedule's name, as `pgq.schedules` and [`Client::schedules`](crate::Client::schedules)
    /// show it: the task's name by default; give one to run a task on two schedules. 1 to
    /// [`MAX_SCHEDULE_NAME_BYTES`](crate::limits::MAX_SCHEDULE_NAME_BYTES) bytes, no control
    /// characters.
    ///
    /// ```
    /// let schedule = pgq_core::Schedule::cron("0 0 3 * * *").name("nightly-report");
    /// # let _ = schedule;
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
}

/// What a schedule does with the instants that came due while no worker ran (or none led):
/// those older than the grace when a leader gets to them: [`SCHEDULE_GRACE`](crate::defaults::SCHEDULE_GRACE),
/// or twice the worker's leader lease when that is longer. Instants within the grace always run,
/// so a leader that dies and is replaced when its lease runs out misses none.
///
/// ```
/// use pgq_core::Missed;
/// assert_eq!(Missed::default(), Missed::Skip);
/// assert_eq!(Missed::Backfill(3).to_string(), "backfill:3");
/// assert_eq!("run_once".parse::<Missed>(), Ok(Missed::RunOnce));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Missed {
    /// Missed instants are not enqueued: the schedule goes on from the next one.
    #[default]
    Skip,
    /// However many were missed, the newest missed instant is enqueued once.
    RunOnce,
    /// The newest `n` missed instants are enqueued (at most
    /// [`MAX_BACKFILL`](crate::limits::MAX_BACKFILL)), oldest first.
    Backfill(u32),
}

impl fmt::Display for Missed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missed::Skip => f.write_str("skip"),
            Missed::RunOnce => f.write_str("run_once"),
            Missed::Backfill(n) => write!(f, "backfill:{n}"),
        }
    }
}

impl std::str::FromStr for Missed {
    type Err = String;

    /// `skip`, `run_once` or `backfill:N`, as [`Display`](fmt::Display) writes them.
    fn from_str(text: &str) -> Result<Self, String> {
        match text {
            "skip" => Ok(Missed::Skip),
            "run_once" => Ok(Missed::RunOnce),
            _ => text
                .strip_prefix("backfill:")
                .and_then(|n| n.parse().ok())
                .map(Missed::Backfill)
                .ok_or_else(|| format!("{text:?} is not skip, run_once or backfill:N")),
        }
    }
}

/// A cron expression parsed, with its time zone: the instants a schedule has.
#[derive(Debug, Clone)]
pub(crate) struct Cadence {
    cron: croner::Cron,
    zone: chrono_tz::Tz,
}

impl Cadence {
    /// Parses an expression and a time zone name; the error says which is wrong.
    pub(crate) fn parse(cron: &str, zone: &str) -> Result<Self, String> {
        let fields = cron.split_whitespace().count();
        if !(5..=6).contains(&fields) && !cron.trim_start().starts_with('@') {
            return Err(format!(
                "cron expression {cron:?} has {fields} fields; it has six, seconds first, or five"
            ));
        }
        let parsed = croner::Cron::from_str(cron)
            .map_err(|err| format!("cron expression {cron:?} does not parse: {err}"))?;
        let zone = zone.parse::<chrono_tz::Tz>().map_err(|_| {
            format!(
                "unknown time zone {zone:?}; use an IANA name such as \"Europe/Paris\" or \"UTC\""
            )
        })?;
        let cadence = Self { cron: parsed, zone };
        // A date no calendar has (the 30th of February) parses, and would never come.
        if cadence.next_after(Utc::now()).is_none() {
            return Err(format!("cron expression {cron:?} names no instant to come"));
        }
        Ok(cadence)
    }

    /// The first instant strictly after `t`.
    pub(crate) fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut t = if t < searchable_from() {
            searchable_from()
        } else if t > searchable_until() {
            return None;
        } else {
            t
        };
        loop {
            let local = self.zone.from_utc_datetime(&t.naive_utc());
            let next = self.cron.find_next_occurrence(&local, false).ok()?;
            if self.happens(&next) {
                return Some(next.with_timezone(&Utc));
            }
            t = next.with_timezone(&Utc);
        }
    }

    /// The last instant at or before `t`.
    pub(crate) fn last_until(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let mut t = if t > searchable_until() {
            searchable_until()
        } else if t < searchable_from() {
            return None;
        } else {
            t
        };
        loop {
            let local = self.zone.from_utc_datetime(&t.naive_utc());
            let last = self.cron.find_previous_occurrence(&local, true).ok()?;
            if self.happens(&last) {
                return Some(last.with_timezone(&Utc));
            }
            t = last.with_timezone(&Utc) - chrono::Duration::microseconds(1);
        }
    }

    /// Whether an instant croner found is one of the schedule's. croner runs a wall-clock time
    /// that a clock change skips at the first instant after the gap, and an interval pattern at
    /// both instants of a wall-clock time the change repeats; the schedule's instants are the
    /// wall-clock times its expression names, so the first does not happen and the second
    /// happens once, at the earlier instant.
    fn happens(&self, instant: &DateTime<chrono_tz::Tz>) -> bool {
        if !self.cron.is_time_matching(instant).unwrap_or(false) {
            return false;
        }
        match self.zone.from_local_datetime(&instant.naive_local()) {
            chrono::LocalResult::Ambiguous(earlier, _) => earlier == *instant,
            _ => true,
        }
    }

    /// The instants in `(after, through]`, oldest first, at most `max`.
    fn between(
        &self,
        after: DateTime<Utc>,
        through: DateTime<Utc>,
        max: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut instants = Vec::new();
        let mut at = after;
        while instants.len() < max {
            match self.next_after(at) {
                Some(next) if next <= through => {
                    instants.push(next);
                    at = next;
                }
                _ => break,
            }
        }
        instants
    }

    /// The newest `n` instants in `(after, through]`, oldest first.
    fn newest(&self, after: DateTime<Utc>, through: DateTime<Utc>, n: u32) -> Vec<DateTime<Utc>> {
        let mut instants = Vec::new();
        let mut at = through;
        while instants.len() < n as usize {
            match self.last_until(at) {
                Some(last) if last > after => {
                    instants.push(last);
                    at = last - chrono::Duration::microseconds(1);
                }
                _ => break,
            }
        }
        instants.reverse();
        instants
    }
}

/// The times a cadence is searched within. croner finds no instant past the year 5000, and near
/// chrono's own bounds (a watermark written by hand as `infinity` reads as the latest) its search
/// overflows and panics: outside these, a search starts at the nearest of them or finds nothing.
fn searchable_from() -> DateTime<Utc> {
    DateTime::from_timestamp(-62_135_510_400, 0).unwrap_or(DateTime::UNIX_EPOCH) // 0001-01-02
}

fn searchable_until() -> DateTime<Utc> {
    DateTime::from_timestamp(95_648_947_200, 0).unwrap_or(DateTime::UNIX_EPOCH) // 5000-12-30
}

/// What one step of a schedule does at `now`: the instants to enqueue, oldest first, and the
/// watermark once they are (every instant up to it enqueued or passed over).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Due {
    pub(crate) instants: Vec<DateTime<Utc>>,
    pub(crate) done_through: DateTime<Utc>,
}

/// The instants of `cadence` due at `now` past the watermark `done_through`: each on-time one
/// (no older than `grace`), and of the missed ones what `missed` keeps. `None` when no
/// instant came due since the watermark, so that nothing needs writing.
pub(crate) fn due(
    cadence: &Cadence,
    missed: Missed,
    done_through: DateTime<Utc>,
    now: DateTime<Utc>,
    grace: Duration,
) -> Option<Due> {
    let latest = cadence
        .last_until(now)
        .filter(|latest| *latest > done_through)?;
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::MAX);
    // The newest missed moment: an instant exactly `grace` old is on time.
    let late = now
        .checked_sub_signed(grace)
        .and_then(|oldest_on_time| {
            oldest_on_time.checked_sub_signed(chrono::Duration::nanoseconds(1))
        })
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    let mut instants = if late > done_through {
        match missed {
            Missed::Skip => Vec::new(),
            Missed::RunOnce => cadence.newest(done_through, late, 1),
            Missed::Backfill(n) => cadence.newest(done_through, late, n.min(limits::MAX_BACKFILL)),
        }
    } else {
        Vec::new()
    };
    let on_time = done_through.max(late);
    let mut due_now = cadence.between(on_time, now, limits::MAX_ON_TIME_INSTANTS);
    if due_now.len() == limits::MAX_ON_TIME_INSTANTS && due_now.last() != Some(&latest) {
        // More than a step enqueues (a grace of hours, a cron of seconds): the newest run, the
        // older ones are passed over as missed.
        due_now = cadence.newest(on_time, now, limits::MAX_ON_TIME_INSTANTS as u32);
        instants.clear();
    }
    instants.extend(due_now);
    Some(Due {
        instants,
        done_through: latest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .unwrap()
            .with_timezone(&Utc)
    }

    const GRACE: Duration = Duration::from_secs(60);

    fn minutely() -> Cadence {
        Cadence::parse("0 * * * * *", "UTC").unwrap()
    }

    #[test]
    fn bad_expressions_and_zones_say_what_is_wrong() {
        let err = Cadence::parse("61 * * * * *", "UTC").unwrap_err();
        assert!(
            err.starts_with("cron expression \"61 * * * * *\" does not parse"),
            "{err}"
        );
        let err = Cadence::parse("* * * * * *", "Mars/Olympus").unwrap_err();
        assert!(
            err.starts_with("unknown time zone \"Mars/Olympus\""),
            "{err}"
        );
    }

    #[test]
    fn expressions_that_never_fire_or_have_other_fields_are_refused() {
        let started = std::time::Instant::now();
        let err = Cadence::parse("0 0 0 30 2 *", "UTC").unwrap_err();
        assert_eq!(
            err,
            "cron expression \"0 0 0 30 2 *\" names no instant to come"
        );
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        let err = Cadence::parse("0 0 0 1 1 * 2020", "UTC").unwrap_err();
        assert!(err.contains("has 7 fields"), "{err}");
        let err = Cadence::parse("0 0", "UTC").unwrap_err();
        assert!(err.contains("has 2 fields"), "{err}");
        // A leap day comes.
        Cadence::parse("0 0 0 29 2 *", "UTC").unwrap();
    }

    #[test]
    fn nicknames_stand_for_their_five_fields() {
        let after = at("2026-03-14T08:30:01Z");
        for (nickname, next) in [
            ("@hourly", "2026-03-14T09:00:00Z"),
            ("@daily", "2026-03-15T00:00:00Z"),
            ("@weekly", "2026-03-15T00:00:00Z"),
            ("@monthly", "2026-04-01T00:00:00Z"),
            ("@yearly", "2027-01-01T00:00:00Z"),
            ("@annually", "2027-01-01T00:00:00Z"),
        ] {
            let cadence = Cadence::parse(nickname, "UTC").unwrap();
            assert_eq!(cadence.next_after(after), Some(at(next)), "{nickname}");
        }
        assert!(Cadence::parse("@reboot", "UTC").is_err());
        assert!(Cadence::parse("@every 5m", "UTC").is_err());
    }

    #[test]
    fn five_fields_mean_second_zero() {
        let cadence = Cadence::parse("*/5 * * * *", "UTC").unwrap();
        assert_eq!(
            cadence.next_after(at("2026-01-01T10:00:01Z")),
            Some(at("2026-01-01T10:05:00Z"))
        );
    }

    #[test]
    fn a_time_zone_moves_the_instants_with_daylight_saving() {
        let cadence = Cadence::parse("0 0 9 * * *", "Europe/Paris").unwrap();
        // Winter: UTC+1; summer: UTC+2.
        assert_eq!(
            cadence.next_after(at("2026-01-10T00:00:00Z")),
            Some(at("2026-01-10T08:00:00Z"))
        );
        assert_eq!(
            cadence.next_after(at("2026-07-10T00:00:00Z")),
            Some(at("2026-07-10T07:00:00Z"))
        );
    }

    /// Paris moved its clocks from 02:00 to 03:00 on 2026-03-29 and from 03:00 back to 02:00
    /// on 2026-10-25.
    #[test]
    fn a_clock_change_skips_the_instants_it_skips_and_repeats_none() {
        let half_past_two = Cadence::parse("0 30 2 * * *", "Europe/Paris").unwrap();
        // 02:30 did not happen on the 29th: the next is the 30th's, 02:30 CEST.
        assert_eq!(
            half_past_two.next_after(at("2026-03-28T12:00:00Z")),
            Some(at("2026-03-30T00:30:00Z"))
        );
        assert_eq!(
            half_past_two.last_until(at("2026-03-30T00:00:00Z")),
            Some(at("2026-03-28T01:30:00Z"))
        );
        // 02:30 happened twice on 2026-10-25: once for the schedule, at the first.
        assert_eq!(
            half_past_two.next_after(at("2026-10-24T12:00:00Z")),
            Some(at("2026-10-25T00:30:00Z"))
        );
        assert_eq!(
            half_past_two.next_after(at("2026-10-25T00:30:00Z")),
            Some(at("2026-10-26T01:30:00Z"))
        );
        // Every half hour: 02:00 and 02:30 once each in the repeated hour.
        let half_hourly = Cadence::parse("0 */30 * * * *", "Europe/Paris").unwrap();
        let instants =
            half_hourly.between(at("2026-10-24T23:45:00Z"), at("2026-10-25T02:45:00Z"), 20);
        assert_eq!(
            instants,
            [
                at("2026-10-25T00:00:00Z"), // 02:00 CEST
                at("2026-10-25T00:30:00Z"), // 02:30 CEST
                at("2026-10-25T02:00:00Z"), // 03:00 CET
                at("2026-10-25T02:30:00Z"), // 03:30 CET
            ]
        );
        assert_eq!(
            half_hourly.newest(at("2026-10-24T23:45:00Z"), at("2026-10-25T02:45:00Z"), 20),
            instants
        );
    }

    #[test]
    fn nothing_is_due_before_the_next_instant() {
        let done = at("2026-01-01T10:00:00Z");
        assert_eq!(
            due(
                &minutely(),
                Missed::Skip,
                done,
                at("2026-01-01T10:00:59Z"),
                GRACE
            ),
            None
        );
    }

    #[test]
    fn on_time_instants_run_whatever_the_policy() {
        let done = at("2026-01-01T10:00:00Z");
        let now = at("2026-01-01T10:01:00.5Z");
        let due = due(&minutely(), Missed::Skip, done, now, GRACE).unwrap();
        assert_eq!(due.instants, [at("2026-01-01T10:01:00Z")]);
        assert_eq!(due.done_through, at("2026-01-01T10:01:00Z"));
    }

    #[test]
    fn more_on_time_instants_than_a_step_enqueues_leave_out_the_oldest() {
        let every_second = Cadence::parse("* * * * * *", "UTC").unwrap();
        let now = at("2026-01-01T12:00:00Z");
        let due = due(
            &every_second,
            Missed::Backfill(5),
            now - chrono::Duration::hours(4),
            now,
            Duration::from_secs(6 * 3600),
        )
        .unwrap();
        assert_eq!(due.instants.len(), limits::MAX_ON_TIME_INSTANTS);
        assert_eq!(due.instants.last(), Some(&now), "the instant due now runs");
        assert_eq!(due.done_through, now);
        assert!(due.instants.windows(2).all(|w| w[0] < w[1]));
    }

    /// Missed means older than the grace: an instant exactly that old still runs on time.
    #[test]
    fn an_instant_exactly_the_grace_old_is_on_time() {
        let done = at("2026-01-01T10:00:00Z");
        let now = at("2026-01-01T10:02:00Z");
        for missed in [Missed::Skip, Missed::RunOnce] {
            let due = due(&minutely(), missed, done, now, GRACE).unwrap();
            assert_eq!(
                due.instants,
                [at("2026-01-01T10:01:00Z"), at("2026-01-01T10:02:00Z")],
                "{missed}"
            );
        }
    }

    #[test]
    fn missed_instants_follow_the_policy() {
        // Ten minutes without a leader: 10:01 .. 10:09 missed, 10:10 on time.
        let done = at("2026-01-01T10:00:00Z");
        let now = at("2026-01-01T10:10:30Z");
        let run = |missed| due(&minutely(), missed, done, now, GRACE).unwrap();
        let on_time = at("2026-01-01T10:10:00Z");
        assert_eq!(run(Missed::Skip).instants, [on_time]);
        assert_eq!(
            run(Missed::RunOnce).instants,
            [at("2026-01-01T10:09:00Z"), on_time]
        );
        assert_eq!(
            run(Missed::Backfill(3)).instants,
            [
                at("2026-01-01T10:07:00Z"),
                at("2026-01-01T10:08:00Z"),
                at("2026-01-01T10:09:00Z"),
                on_time
            ]
        );
        assert_eq!(run(Missed::Backfill(100)).instants.len(), 10);
        for missed in [Missed::Skip, Missed::RunOnce, Missed::Backfill(3)] {
            assert_eq!(run(missed).done_through, on_time);
        }
    }

    #[test]
    fn only_missed_instants_move_the_watermark_under_skip() {
        let done = at("2026-01-01T10:00:00Z");
        let now = at("2026-01-01T10:05:30Z");
        let cadence = Cadence::parse("0 */5 * * * *", "UTC").unwrap();
        // 10:05 is 30 s late: on time.
        assert_eq!(
            due(&cadence, Missed::Skip, done, now, GRACE)
                .unwrap()
                .instants,
            [at("2026-01-01T10:05:00Z")]
        );
        // Two minutes late: missed, passed over, and the watermark moves past it.
        let now = at("2026-01-01T10:07:00Z");
        let skipped = due(&cadence, Missed::Skip, done, now, GRACE).unwrap();
        assert!(skipped.instants.is_empty());
        assert_eq!(skipped.done_through, at("2026-01-01T10:05:00Z"));
    }

    #[test]
    fn the_policy_text_round_trips() {
        for missed in [Missed::Skip, Missed::RunOnce, Missed::Backfill(12)] {
            assert_eq!(missed.to_string().parse::<Missed>(), Ok(missed));
        }
        assert!("backfill:".parse::<Missed>().is_err());
        assert!("never".parse::<Missed>().is_err());
    }

    #[test]
    fn times_beyond_the_searchable_years_find_nothing_or_start_at_their_edge() {
        let earliest: DateTime<Utc> = "-4713-11-24T00:00:00Z".parse().unwrap();
        for zone in [
            "UTC",
            "Europe/Paris",
            "America/New_York",
            "Pacific/Kiritimati",
        ] {
            let cadence = Cadence::parse("0 * * * * *", zone).unwrap();
            assert_eq!(cadence.next_after(DateTime::<Utc>::MAX_UTC), None, "{zone}");
            assert_eq!(cadence.last_until(earliest), None, "{zone}");
            let last = cadence.last_until(DateTime::<Utc>::MAX_UTC).unwrap();
            assert!(last.to_rfc3339().starts_with("5000-12-"), "{zone}: {last}");
            let first = cadence.next_after(earliest).unwrap();
            assert!(
                first.to_rfc3339().starts_with("0001-01-0"),
                "{zone}: {first}"
            );
        }
    }
}
