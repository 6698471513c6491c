//! [`Expect`]: what an enqueued job must look like besides its payload — queue, priority,
//! status, schedule, tags, and how many such jobs there are.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};
use pgq_core::{Job, JobFilter, JobStatus};

/// When a job must be scheduled to run.
#[derive(Debug, Clone, PartialEq)]
enum Scheduled {
    At(DateTime<Utc>),
    Between(DateTime<Utc>, DateTime<Utc>),
    /// Within the first duration (the slack), either way, of the second after now when the
    /// assertion runs.
    Within(Duration, Duration),
}

/// What a job must match besides its payload, for
/// [`assert_enqueued_with`](crate::assert_enqueued_with) and its relatives. By default a job
/// matches when it is `pending`, in any queue, at any priority and schedule; each setting
/// narrows that.
///
/// ```
/// use std::time::Duration;
/// use pgq_core::JobStatus;
/// use pgq_testkit::Expect;
///
/// let expect = Expect::default()
///     .queue("email")
///     .priority(150)
///     .scheduled_within(Duration::from_secs(3600), Duration::from_secs(5))
///     .tag("tenant", "acme")
///     .count(1);
/// assert_eq!(expect.statuses(), [JobStatus::Pending]);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[must_use]
pub struct Expect {
    queue: Option<String>,
    priority: Option<i16>,
    statuses: Vec<JobStatus>,
    scheduled: Option<Scheduled>,
    tags: BTreeMap<String, String>,
    count: Option<usize>,
}

impl Expect {
    /// In this queue: a name an enqueue accepts (no job is in another: asking for one panics).
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        let queue = queue.into();
        if let Err(err) = JobFilter::new().queue(queue.as_str()).validate() {
            panic!("Expect::queue({queue:?}): no job is in it: {err}");
        }
        self.queue = Some(queue);
        self
    }

    /// At this priority, within `limits::MIN_PRIORITY..=limits::MAX_PRIORITY` (no job has
    /// another: asking for one panics).
    pub fn priority(mut self, priority: i16) -> Self {
        let range = pgq_core::limits::MIN_PRIORITY..=pgq_core::limits::MAX_PRIORITY;
        assert!(
            range.contains(&priority),
            "Expect::priority({priority}): no job has it, priorities are {range:?}"
        );
        self.priority = Some(priority);
        self
    }

    /// In this status (call again for any of several); `pending` when never called.
    pub fn status(mut self, status: JobStatus) -> Self {
        self.statuses.push(status);
        self
    }

    /// Scheduled to run at exactly this time, to the microsecond (what PostgreSQL keeps).
    pub fn scheduled_at(mut self, at: DateTime<Utc>) -> Self {
        self.scheduled = Some(Scheduled::At(at));
        self
    }

    /// Scheduled to run between these times, both included, to the microsecond (what
    /// PostgreSQL keeps: a time given to the enqueue is stored cut to its microsecond).
    pub fn scheduled_between(mut self, from: DateTime<Utc>, to: DateTime<Utc>) -> Self {
        assert!(
            from <= to,
            "Expect::scheduled_between({from}, {to}): the range is empty, no job matches it"
        );
        self.scheduled = Some(Scheduled::Between(from, to));
        self
    }

    /// Scheduled to run `from_now` after now, give or take `slack`: for delays, whose exact time
    /// the database's clock decides.
    pub fn scheduled_within(mut self, from_now: Duration, slack: Duration) -> Self {
        self.scheduled = Some(Scheduled::Within(slack, from_now));
        self
    }

    /// Tagged `name = value` ([`EnqueueOptions::tag`](pgq_core::EnqueueOptions::tag)), within
    /// the bounds a tag has (no job has another: asking for one panics).
    pub fn tag(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        if let Err(err) = JobFilter::new()
            .tag(name.as_str(), value.as_str())
            .validate()
        {
            panic!("Expect::tag({name:?}, {value:?}): no job has it: {err}");
        }
        self.tags.insert(name, value);
        self
    }

    /// Exactly this many matching jobs, instead of at least one.
    pub fn count(mut self, count: usize) -> Self {
        self.count = Some(count);
        self
    }

    /// The statuses a job may be in to match.
    pub fn statuses(&self) -> Vec<JobStatus> {
        if self.statuses.is_empty() {
            vec![JobStatus::Pending]
        } else {
            self.statuses.clone()
        }
    }

    pub(crate) fn expected_count(&self) -> Option<usize> {
        self.count
    }

    /// Whether `job` matches everything but its payload.
    pub(crate) fn matches(&self, job: &Job) -> bool {
        self.statuses().contains(&job.status)
            && self.queue.as_ref().is_none_or(|q| *q == job.queue)
            && self.priority.is_none_or(|p| p == job.priority)
            && self
                .scheduled
                .as_ref()
                .is_none_or(|s| scheduled(s, job.run_at))
            && self.tags.iter().all(|(name, value)| {
                job.meta
                    .as_ref()
                    .and_then(|meta| meta.get("tags"))
                    .and_then(|tags| tags.get(name))
                    .and_then(|v| v.as_str())
                    == Some(value.as_str())
            })
    }
}

fn scheduled(expected: &Scheduled, run_at: DateTime<Utc>) -> bool {
    match expected {
        // PostgreSQL keeps microseconds.
        Scheduled::At(at) => run_at.timestamp_micros() == at.timestamp_micros(),
        Scheduled::Between(from, to) => {
            let run_at = run_at.timestamp_micros();
            from.timestamp_micros() <= run_at && run_at <= to.timestamp_micros()
        }
        Scheduled::Within(slack, from_now) => {
            // Beyond what chrono holds, a duration is as long as it gets.
            let long =
                |d: &Duration| chrono::Duration::from_std(*d).unwrap_or(chrono::Duration::MAX);
            let base = Utc::now()
                .checked_add_signed(long(from_now))
                .unwrap_or(DateTime::<Utc>::MAX_UTC);
            (run_at - base).abs() <= long(slack)
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let statuses: Vec<&str> = self.statuses().iter().map(|s| s.as_str()).collect();
        write!(f, "status {}", statuses.join(" or "))?;
        if let Some(queue) = &self.queue {
            write!(f, ", queue {queue:?}")?;
        }
        if let Some(priority) = self.priority {
            write!(f, ", priority {priority}")?;
        }
        match &self.scheduled {
            Some(Scheduled::At(at)) => write!(f, ", scheduled at {at}")?,
            Some(Scheduled::Between(from, to)) => write!(f, ", scheduled between {from} and {to}")?,
            Some(Scheduled::Within(slack, from_now)) => {
                write!(f, ", scheduled {from_now:?} from now ± {slack:?}")?
            }
            None => {}
        }
        for (name, value) in &self.tags {
            write!(f, ", tag {name}={value:?}")?;
        }
        Ok(())
    }
}
