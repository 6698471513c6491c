//! The last hour of a queue as a small bar chart: an inline SVG drawn on the server, so it
//! needs no script and no image request.

use chrono::{DateTime, TimeDelta, Utc};
use maud::{Markup, html};
use pgq_core::{FINISHED_HISTORY_MINUTES, FinishedMinute};

const BAR: u32 = 3;
const GAP: u32 = 1;
const HEIGHT: u32 = 32;

/// Completed and failed counts for each of the last hour's minutes, oldest first.
pub(crate) fn buckets<'a>(
    now: DateTime<Utc>,
    minutes: impl IntoIterator<Item = &'a FinishedMinute>,
) -> Vec<(u64, u64)> {
    let count = FINISHED_HISTORY_MINUTES as usize;
    let mut buckets = vec![(0, 0); count];
    for minute in minutes {
        let back = (now - minute.minute).num_minutes();
        if let Ok(back) = usize::try_from(back)
            && back < count
        {
            let bucket = &mut buckets[count - 1 - back];
            bucket.0 += minute.completed;
            bucket.1 += minute.failed;
        }
    }
    buckets
}

/// The chart: one bar a minute, completed below failed, scaled to the busiest minute.
pub(crate) fn bars(now: DateTime<Utc>, buckets: &[(u64, u64)]) -> Markup {
    let width = buckets.len() as u32 * (BAR + GAP);
    let peak = buckets.iter().map(|(c, f)| c + f).max().unwrap_or(0).max(1);
    let scale = |n: u64| ((n * u64::from(HEIGHT)).div_ceil(peak)) as u32;
    let (completed, failed) = buckets
        .iter()
        .fold((0, 0), |(c, f), (bc, bf)| (c + bc, f + bf));
    let label = format!("last hour: {completed} completed, {failed} failed");
    let count = buckets.len() as i64;
    html! {
        svg.chart width=(width) height=(HEIGHT) viewBox=(format!("0 0 {width} {HEIGHT}"))
            preserveAspectRatio="none" role="img" aria-label=(label) {
            title { (label) }
            @for (i, (c, f)) in buckets.iter().enumerate() {
                @let x = i as u32 * (BAR + GAP);
                @let hc = scale(*c);
                @let hf = scale(*f);
                @let at = now - TimeDelta::minutes(count - 1 - i as i64);
                g {
                    title { (at.format("%H:%M")) ": " (c) " completed, " (f) " failed" }
                    rect.track x=(x) y="0" width=(BAR) height=(HEIGHT) {}
                    @if hc > 0 {
                        rect.completed x=(x) y=(HEIGHT - hc) width=(BAR) height=(hc) {}
                    }
                    @if hf > 0 {
                        rect.failed x=(x) y=(HEIGHT.saturating_sub(hc + hf)) width=(BAR) height=(hf) {}
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeDelta, TimeZone, Utc};
    use pgq_core::FinishedMinute;

    use super::buckets;

    #[test]
    fn minutes_land_in_their_bucket_and_older_ones_are_left_out() {
        let now = Utc.with_ymd_and_hms(2026, 1, 1, 12, 0, 0).unwrap();
        let minute = |back: i64, completed, failed| {
            let mut m = FinishedMinute::default();
            m.queue = "q".into();
            m.minute = now - TimeDelta::minutes(back);
            m.completed = completed;
            m.failed = failed;
            m
        };
        let minutes = [minute(0, 5, 1), minute(59, 2, 0), minute(60, 9, 9)];
        let buckets = buckets(now, &minutes);
        assert_eq!(buckets.len(), 60);
        assert_eq!(buckets[59], (5, 1));
        assert_eq!(buckets[0], (2, 0));
        assert_eq!(buckets.iter().map(|b| b.0 + b.1).sum::<u64>(), 8);
    }
}
