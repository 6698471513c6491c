//! The filter flags shared by `jobs list` and the actions, checked before any connection.

use std::ops::Bound;

use chrono::{DateTime, Utc};
use clap::Args;
use pgq_core::{JobFilter, JobId, JobStatus};

use crate::failure::Failure;
use crate::time_arg::parse_time;

/// Which jobs: every flag given must hold.
#[derive(Debug, Args, Default, Clone)]
pub(crate) struct FilterArgs {
    /// pending, claimed, running, completed, failed or cancelled; repeat or separate with commas.
    #[arg(long, value_delimiter = ',', value_parser = parse_status)]
    pub(crate) status: Vec<JobStatus>,
    /// Task name.
    #[arg(long)]
    pub(crate) task: Option<String>,
    /// Queue name.
    #[arg(long)]
    pub(crate) queue: Option<String>,
    /// Unique key.
    #[arg(long)]
    pub(crate) unique_key: Option<String>,
    /// Ids from this one.
    #[arg(long)]
    pub(crate) min_id: Option<JobId>,
    /// Ids up to this one.
    #[arg(long)]
    pub(crate) max_id: Option<JobId>,
    /// Enqueued at or after: a time (2026-11-24T08:00:00Z, 2026-11-24) or an age (90s, 15m, 2h, 7d).
    #[arg(long, value_parser = parse_time)]
    pub(crate) created_after: Option<DateTime<Utc>>,
    /// Enqueued before: a time or an age.
    #[arg(long, value_parser = parse_time)]
    pub(crate) created_before: Option<DateTime<Utc>>,
    /// Due (run_at) at or after: a time or an age.
    #[arg(long, value_parser = parse_time)]
    pub(crate) run_after: Option<DateTime<Utc>>,
    /// Due (run_at) before: a time or an age.
    #[arg(long, value_parser = parse_time)]
    pub(crate) run_before: Option<DateTime<Utc>>,
    /// Finished at or after: a time or an age.
    #[arg(long, value_parser = parse_time)]
    pub(crate) finished_after: Option<DateTime<Utc>>,
    /// Finished before: a time or an age.
    #[arg(long, value_parser = parse_time)]
    pub(crate) finished_before: Option<DateTime<Utc>>,
    /// Text in the last error, ignoring case.
    #[arg(long)]
    pub(crate) error: Option<String>,
    /// A tag the job was enqueued with, NAME=VALUE; repeat for several.
    #[arg(long, value_parser = parse_tag)]
    pub(crate) tag: Vec<(String, String)>,
}

impl FilterArgs {
    /// Whether any flag was given: actions refuse to run on every job by accident.
    pub(crate) fn is_empty(&self) -> bool {
        self.status.is_empty()
            && self.task.is_none()
            && self.queue.is_none()
            && self.unique_key.is_none()
            && self.min_id.is_none()
            && self.max_id.is_none()
            && self.created_after.is_none()
            && self.created_before.is_none()
            && self.run_after.is_none()
            && self.run_before.is_none()
            && self.finished_after.is_none()
            && self.finished_before.is_none()
            && self.error.is_none()
            && self.tag.is_empty()
    }

    /// Whether a finished-time bound is given: only finished jobs can match it.
    pub(crate) fn names_a_finish(&self) -> bool {
        self.finished_after.is_some() || self.finished_before.is_some()
    }

    /// The filter, checked as the API would check it.
    pub(crate) fn filter(&self) -> Result<JobFilter, Failure> {
        if self.names_a_finish()
            && !self.status.is_empty()
            && !self.status.iter().any(|status| status.is_finished())
        {
            return Err(Failure::Usage(
                "--finished-after and --finished-before match finished jobs only (completed, \
                 failed, cancelled): --status names none of them"
                    .into(),
            ));
        }
        let mut filter = JobFilter::new().statuses(self.status.iter().copied());
        if let Some(task) = &self.task {
            filter = filter.task(task);
        }
        if let Some(queue) = &self.queue {
            filter = filter.queue(queue);
        }
        if let Some(key) = &self.unique_key {
            filter = filter.unique_key(key);
        }
        if let (Some(min), Some(max)) = (self.min_id, self.max_id)
            && min > max
        {
            return Err(Failure::Usage(format!(
                "the id range {min} .. {max} is empty: --min-id is above --max-id"
            )));
        }
        filter = match (self.min_id, self.max_id) {
            (Some(min), Some(max)) => filter.ids(min..=max),
            (Some(min), None) => filter.ids(min..),
            (None, Some(max)) => filter.ids(..=max),
            (None, None) => filter,
        };
        filter = match (self.created_after, self.created_before) {
            (None, None) => filter,
            (from, until) => filter.created(range(from, until)?),
        };
        filter = match (self.run_after, self.run_before) {
            (None, None) => filter,
            (from, until) => filter.run_at(range(from, until)?),
        };
        filter = match (self.finished_after, self.finished_before) {
            (None, None) => filter,
            (from, until) => filter.finished(range(from, until)?),
        };
        if let Some(text) = &self.error {
            filter = filter.error_contains(text);
        }
        for (i, (name, value)) in self.tag.iter().enumerate() {
            // Every filter must hold: one tag with two values matches no job, and is a mistake.
            if let Some((_, other)) = self.tag[..i].iter().find(|(n, v)| n == name && v != value) {
                return Err(Failure::Usage(format!(
                    "--tag {name} is given twice, as {other:?} and {value:?}: a job has one value"
                )));
            }
            filter = filter.tag(name, value);
        }
        filter.validate()?;
        Ok(filter)
    }
}

/// A time range as `JobFilter` takes it: `(start, end)`.
type TimeBounds = (Bound<DateTime<Utc>>, Bound<DateTime<Utc>>);

/// `[from, until)` with either end open, refused when it is empty.
fn range(from: Option<DateTime<Utc>>, until: Option<DateTime<Utc>>) -> Result<TimeBounds, Failure> {
    use std::ops::Bound::{Excluded, Included, Unbounded};
    if let (Some(from), Some(until)) = (from, until)
        && from >= until
    {
        return Err(Failure::Usage(format!(
            "the time range {from} .. {until} is empty: its start is not before its end"
        )));
    }
    Ok((
        from.map_or(Unbounded, Included),
        until.map_or(Unbounded, Excluded),
    ))
}

fn parse_status(text: &str) -> Result<JobStatus, String> {
    text.parse::<JobStatus>().map_err(|_| {
        format!(
            "unknown status {text:?}: pending, claimed, running, completed, failed or cancelled"
        )
    })
}

fn parse_tag(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.is_empty() => Ok((name.to_owned(), value.to_owned())),
        _ => Err(format!("tag {text:?} is not NAME=VALUE")),
    }
}

#[cfg(test)]
mod tests {
    use super::{FilterArgs, parse_status, parse_tag};

    #[test]
    fn tags_and_statuses_parse_or_say_why_not() {
        assert_eq!(
            parse_tag("tenant=acme").unwrap(),
            ("tenant".into(), "acme".into())
        );
        assert_eq!(
            parse_tag("empty=").unwrap(),
            ("empty".into(), String::new())
        );
        assert!(parse_tag("=x").is_err());
        assert!(parse_tag("novalue").is_err());
        assert!(parse_status("failed").is_ok());
        assert!(parse_status("done").unwrap_err().contains("pending"));
    }

    #[test]
    fn an_empty_id_range_and_a_tag_with_two_values_are_usage_errors() {
        let usage =
            |args: FilterArgs| matches!(args.filter(), Err(crate::failure::Failure::Usage(_)));
        assert!(usage(FilterArgs {
            min_id: Some(100.into()),
            max_id: Some(5.into()),
            ..FilterArgs::default()
        }));
        let tags = |tags: &[(&str, &str)]| FilterArgs {
            tag: tags
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect(),
            ..FilterArgs::default()
        };
        assert!(usage(tags(&[("tenant", "acme"), ("tenant", "globex")])));
        assert!(
            tags(&[("tenant", "acme"), ("tenant", "acme")])
                .filter()
                .is_ok()
        );
        assert!(
            tags(&[("tenant", "acme"), ("region", "eu")])
                .filter()
                .is_ok()
        );
        assert!(
            FilterArgs {
                min_id: Some(5.into()),
                max_id: Some(5.into()),
                ..FilterArgs::default()
            }
            .filter()
            .is_ok()
        );
    }

    #[test]
    fn an_empty_time_range_is_a_usage_error() {
        let now = chrono::Utc::now();
        let args = FilterArgs {
            created_after: Some(now),
            created_before: Some(now),
            ..FilterArgs::default()
        };
        assert!(matches!(
            args.filter(),
            Err(crate::failure::Failure::Usage(_))
        ));
    }
}
