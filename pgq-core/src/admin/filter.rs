//! [`JobFilter`]: which jobs an operator means, and in which order and pages they come.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use chrono::{DateTime, TimeDelta, Utc};

use crate::admin::cursor::JobCursor;
use crate::error::{Error, Result};
use crate::job::JobStatus;
use crate::job_id::JobId;
use crate::store::moment;
use crate::{limits, queue};

/// The order in which [`Client::jobs`](crate::Client::jobs) returns jobs.
///
/// ```
/// use pgq_core::{JobFilter, JobOrder, JobStatus};
///
/// // Pending jobs, soonest first (workers take higher priorities first, then the soonest).
/// let next_up = JobFilter::new().status(JobStatus::Pending).order(JobOrder::RunAt);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOrder {
    /// Highest id first: the newest jobs.
    #[default]
    Newest,
    /// Lowest id first: the oldest jobs.
    Oldest,
    /// Pending jobs only, soonest `run_at` first, then lowest id. Pages are keyed on
    /// `(run_at, id)`: a job whose `run_at` moves while you page may be seen twice or not at all.
    RunAt,
}

/// A half-open time range, `[from, until)`, and whether the filter names it at all (a range
/// without bounds still limits `finished` to finished jobs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TimeRange {
    pub(crate) from: Option<DateTime<Utc>>,
    pub(crate) until: Option<DateTime<Utc>>,
    named: bool,
}

impl TimeRange {
    /// The range as `[from, until)`: PostgreSQL keeps microseconds, so an inclusive end (or an
    /// exclusive start) moves by one. A time before PostgreSQL's earliest counts as that, and
    /// an inclusive end at chrono's latest as no end, so that any range chrono holds binds.
    fn new(range: impl RangeBounds<DateTime<Utc>>) -> Self {
        let tick = TimeDelta::microseconds(1);
        let from = match range.start_bound() {
            Bound::Included(t) => Some(*t),
            Bound::Excluded(t) => Some(t.checked_add_signed(tick).unwrap_or(*t)),
            Bound::Unbounded => None,
        };
        let until = match range.end_bound() {
            Bound::Included(t) => t.checked_add_signed(tick),
            Bound::Excluded(t) => Some(*t),
            Bound::Unbounded => None,
        };
        Self {
            from: from.map(moment::storable),
            until: until.map(moment::storable),
            named: true,
        }
    }

    /// Whether the filter names this range, bounded or not.
    pub(crate) fn is_set(&self) -> bool {
        self.named
    }

    /// The times in both ranges: a condition named again narrows, as every condition holds.
    fn and(self, other: Self) -> Self {
        Self {
            from: self.from.max(other.from),
            until: match (self.until, other.until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            named: true,
        }
    }
}

/// Which jobs to find or act on: every condition set must hold. Built with chained calls; an
/// empty filter matches every job. A range named again narrows (the ranges intersect), a tag
/// named again with another value matches no job (a job has one), and a task, queue, unique key
/// or error text named again replaces the first. Each condition reads an index, or the search is bounded (see
/// [`Client::jobs`](crate::Client::jobs)).
///
/// ```
/// use chrono::{Duration, Utc};
/// use pgq_core::{JobFilter, JobStatus};
///
/// let since = Utc::now() - Duration::hours(24);
/// let filter = JobFilter::new()
///     .status(JobStatus::Failed)
///     .task("SendWelcome")
///     .queue("email")
///     .finished(since..)
///     .error_contains("timeout")
///     .tag("tenant", "acme")
///     .limit(100);
/// assert!(filter.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct JobFilter {
    pub(crate) statuses: Vec<JobStatus>,
    pub(crate) task: Option<String>,
    pub(crate) queue: Option<String>,
    pub(crate) unique_key: Option<String>,
    /// Ids in `[from, until)`.
    pub(crate) ids: (Option<i64>, Option<i64>),
    pub(crate) created: TimeRange,
    pub(crate) run_at: TimeRange,
    pub(crate) finished: TimeRange,
    pub(crate) error_contains: Option<String>,
    pub(crate) tags: BTreeMap<String, String>,
    /// Tags named again with another value: checked as the others, and no job matches them.
    pub(crate) conflicting_tags: Vec<(String, String)>,
    pub(crate) order: JobOrder,
    pub(crate) after: Option<JobCursor>,
    pub(crate) limit: usize,
}

impl Default for JobFilter {
    fn default() -> Self {
        Self {
            statuses: Vec::new(),
            task: None,
            queue: None,
            unique_key: None,
            ids: (None, None),
            created: TimeRange::default(),
            run_at: TimeRange::default(),
            finished: TimeRange::default(),
            error_contains: None,
            tags: BTreeMap::new(),
            conflicting_tags: Vec::new(),
            order: JobOrder::default(),
            after: None,
            limit: limits::DEFAULT_PAGE_SIZE,
        }
    }
}

impl JobFilter {
    /// A filter that matches every job, newest first, [`DEFAULT_PAGE_SIZE`](limits::DEFAULT_PAGE_SIZE)
    /// a page.
    ///
    /// ```
    /// let everything = pgq_core::JobFilter::new();
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Jobs in this status; call again (or use [`statuses`](Self::statuses)) for several.
    ///
    /// ```
    /// use pgq_core::{JobFilter, JobStatus};
    /// let stuck = JobFilter::new().status(JobStatus::Claimed).status(JobStatus::Running);
    /// ```
    pub fn status(mut self, status: JobStatus) -> Self {
        if !self.statuses.contains(&status) {
            self.statuses.push(status);
        }
        self
    }

    /// Jobs in any of these statuses.
    ///
    /// ```
    /// use pgq_core::{JobFilter, JobStatus};
    /// let retryable = JobFilter::new().statuses([JobStatus::Failed, JobStatus::Cancelled]);
    /// ```
    pub fn statuses(self, statuses: impl IntoIterator<Item = JobStatus>) -> Self {
        statuses.into_iter().fold(self, Self::status)
    }

    /// Jobs of this task name (1 to [`limits::MAX_TASK_NAME_LEN`] characters, as a task's).
    ///
    /// ```
    /// use pgq_core::JobFilter;
    ///
    /// let welcomes = JobFilter::new().task("SendWelcome");
    /// // A name's bound is in characters, not bytes.
    /// assert!(JobFilter::new().task("é".repeat(128)).validate().is_ok());
    /// assert!(JobFilter::new().task("é".repeat(129)).validate().is_err());
    /// ```
    pub fn task(mut self, task: impl Into<String>) -> Self {
        self.task = Some(task.into());
        self
    }

    /// Jobs in this queue.
    ///
    /// ```
    /// let email = pgq_core::JobFilter::new().queue("email");
    /// ```
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }

    /// Jobs with this unique key.
    ///
    /// ```
    /// let user_7 = pgq_core::JobFilter::new().unique_key("welcome:7");
    /// ```
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }

    /// Jobs whose id is in `range`.
    ///
    /// ```
    /// use pgq_core::{JobFilter, JobId};
    /// let batch = JobFilter::new().ids(JobId::from(1_000)..JobId::from(2_000));
    /// ```
    pub fn ids(mut self, range: impl RangeBounds<JobId>) -> Self {
        let from = match range.start_bound() {
            Bound::Included(id) => Some(id.get()),
            Bound::Excluded(id) => Some(id.get().saturating_add(1)),
            Bound::Unbounded => None,
        };
        let until = match range.end_bound() {
            Bound::Included(id) => Some(id.get().saturating_add(1)),
            Bound::Excluded(id) => Some(id.get()),
            Bound::Unbounded => None,
        };
        self.ids = (
            self.ids.0.max(from),
            match (self.ids.1, until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
        );
        self
    }

    /// Jobs enqueued within `range`.
    ///
    /// ```
    /// use chrono::{Duration, Utc};
    /// let last_hour = pgq_core::JobFilter::new().created(Utc::now() - Duration::hours(1)..);
    /// ```
    pub fn created(mut self, range: impl RangeBounds<DateTime<Utc>>) -> Self {
        self.created = self.created.and(TimeRange::new(range));
        self
    }

    /// Jobs whose `run_at` (when they run, or ran last) is within `range`.
    ///
    /// ```
    /// use chrono::{Duration, Utc};
    /// use pgq_core::{JobFilter, JobStatus};
    /// let tonight = JobFilter::new().status(JobStatus::Pending).run_at(Utc::now()..Utc::now() + Duration::hours(12));
    /// ```
    pub fn run_at(mut self, range: impl RangeBounds<DateTime<Utc>>) -> Self {
        self.run_at = self.run_at.and(TimeRange::new(range));
        self
    }

    /// Jobs that finished (`completed_at`) within `range`; unfinished jobs never match.
    ///
    /// ```
    /// use chrono::{Duration, Utc};
    /// let today = pgq_core::JobFilter::new().finished(Utc::now() - Duration::days(1)..);
    /// ```
    pub fn finished(mut self, range: impl RangeBounds<DateTime<Utc>>) -> Self {
        self.finished = self.finished.and(TimeRange::new(range));
        self
    }

    /// Jobs whose last error contains `text`, ignoring case as the database folds it (`ILIKE`:
    /// letters beyond ASCII too under a UTF-8 `LC_CTYPE`, ASCII only under the `C` locale);
    /// `%` and `_` are plain characters.
    /// At most [`MAX_ERROR_SEARCH_BYTES`](limits::MAX_ERROR_SEARCH_BYTES) bytes. Called again,
    /// the new text replaces the old.
    ///
    /// ```
    /// let timeouts = pgq_core::JobFilter::new().error_contains("connection timed out");
    /// ```
    pub fn error_contains(mut self, text: impl Into<String>) -> Self {
        self.error_contains = Some(text.into());
        self
    }

    /// Jobs tagged `name = value` at enqueue (`EnqueueOptions::tag`); call again for more tags,
    /// all of which must match (a second value of one tag matches no job).
    ///
    /// ```
    /// let acme = pgq_core::JobFilter::new().tag("tenant", "acme");
    /// ```
    pub fn tag(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let (name, value) = (name.into(), value.into());
        match self.tags.get(&name) {
            // A job has one value per tag.
            Some(held) if *held != value => self.conflicting_tags.push((name, value)),
            _ => {
                self.tags.insert(name, value);
            }
        }
        self
    }

    /// The order of the results; newest first by default.
    ///
    /// ```
    /// use pgq_core::{JobFilter, JobOrder};
    /// let oldest_first = JobFilter::new().order(JobOrder::Oldest);
    /// ```
    pub fn order(mut self, order: JobOrder) -> Self {
        self.order = order;
        self
    }

    /// Continues after a page: the `next` cursor of the previous [`JobPage`](crate::JobPage).
    ///
    /// ```no_run
    /// # async fn example(client: pgq_core::Client) -> pgq_core::Result<()> {
    /// let filter = pgq_core::JobFilter::new().queue("email");
    /// let first = client.jobs(&filter).await?;
    /// if let Some(next) = first.next {
    ///     let second = client.jobs(&filter.after(next)).await?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn after(mut self, cursor: JobCursor) -> Self {
        self.after = Some(cursor);
        self
    }

    /// At most `limit` jobs a page (1 to [`MAX_PAGE_SIZE`](limits::MAX_PAGE_SIZE)).
    ///
    /// ```
    /// let small_pages = pgq_core::JobFilter::new().limit(20);
    /// ```
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }

    /// Checks the filter without a database, as every call that takes one does first: names
    /// within their rules, a page size within bounds, the error text bounded, a cursor that
    /// fits the order (a `run_at` cursor for [`JobOrder::RunAt`], an id cursor for the others).
    /// Each problem is an [`Error::InvalidFilter`].
    ///
    /// ```
    /// use pgq_core::{JobFilter, JobOrder, JobStatus};
    /// assert!(JobFilter::new().limit(0).validate().is_err());
    /// assert!(JobFilter::new().queue("no spaces").validate().is_err());
    /// assert!(JobFilter::new().status(JobStatus::Failed).order(JobOrder::RunAt).validate().is_err());
    /// ```
    pub fn validate(&self) -> Result<()> {
        let invalid = |reason: String| Err(Error::InvalidFilter(reason));
        if self.limit == 0 || self.limit > limits::MAX_PAGE_SIZE {
            return invalid(format!(
                "limit {} is outside 1 to {}",
                self.limit,
                limits::MAX_PAGE_SIZE
            ));
        }
        if let Some(name) = &self.queue
            && let Err(err) = queue::validate(name)
        {
            return invalid(err.to_string());
        }
        // A task name's bound is in characters, as its column's and an enqueue's.
        if let Some(task) = &self.task {
            let chars = task.chars().count();
            if !(1..=limits::MAX_TASK_NAME_LEN).contains(&chars) {
                return invalid(format!(
                    "task name of {chars} characters; 1 to {} are allowed",
                    limits::MAX_TASK_NAME_LEN
                ));
            }
            searchable("task name", task, 1, usize::MAX).map_err(Error::InvalidFilter)?;
        }
        // (what, text, shortest, longest in bytes): the bounds a stored job's text has. A
        // tag's value can be empty, as an enqueue allows.
        let texts = [
            (
                "unique key",
                self.unique_key.as_deref(),
                1,
                limits::MAX_UNIQUE_KEY_BYTES,
            ),
            (
                "error text",
                self.error_contains.as_deref(),
                1,
                limits::MAX_ERROR_SEARCH_BYTES,
            ),
        ];
        let conflicting = self
            .conflicting_tags
            .iter()
            .map(|(name, value)| (name, value));
        let tags = self
            .tags
            .iter()
            .chain(conflicting)
            .flat_map(|(name, value)| {
                [
                    (
                        "tag name",
                        Some(name.as_str()),
                        1,
                        limits::MAX_TAG_KEY_BYTES,
                    ),
                    (
                        "tag value",
                        Some(value.as_str()),
                        0,
                        limits::MAX_TAG_VALUE_BYTES,
                    ),
                ]
            });
        for (what, text, min, max) in texts.into_iter().chain(tags) {
            if let Some(text) = text {
                searchable(what, text, min, max).map_err(Error::InvalidFilter)?;
            }
        }
        if self.tags.len() > limits::MAX_TAGS {
            return invalid(format!(
                "{} tags; jobs carry at most {}",
                self.tags.len(),
                limits::MAX_TAGS
            ));
        }
        if self.order == JobOrder::RunAt
            && (self.statuses.is_empty() || self.statuses.iter().any(|s| *s != JobStatus::Pending))
        {
            return invalid(
                "ordering by run_at is for pending jobs only: add status pending".into(),
            );
        }
        if let Some(cursor) = &self.after
            && (self.order == JobOrder::RunAt) != cursor.run_at.is_some()
        {
            return invalid("the cursor comes from a search in another order".into());
        }
        Ok(())
    }

    /// Whether every status the filter allows is active (pending, claimed or running): then
    /// only the small partial indexes of active jobs are read, and no window is needed.
    pub(crate) fn active_only(&self) -> bool {
        !self.statuses.is_empty() && self.statuses.iter().all(|s| !s.is_finished())
    }

    /// The filter with its statuses narrowed to `allowed`: those it names among them, or all
    /// of `allowed` when it names none; `None` when it names only others.
    pub(crate) fn within(&self, allowed: &[JobStatus]) -> Option<Self> {
        let statuses: Vec<JobStatus> = if self.statuses.is_empty() {
            allowed.to_vec()
        } else {
            self.statuses
                .iter()
                .copied()
                .filter(|s| allowed.contains(s))
                .collect()
        };
        (!statuses.is_empty()).then(|| Self {
            statuses,
            ..self.clone()
        })
    }
}

/// Text a filter compares with stored text: `min` to `max` bytes, and no NUL character, which
/// PostgreSQL's text cannot hold (no stored job has one, and the database would refuse the
/// statement rather than find nothing).
fn searchable(what: &str, text: &str, min: usize, max: usize) -> std::result::Result<(), String> {
    if text.len() < min || text.len() > max {
        return Err(format!(
            "{what} of {} bytes; {min} to {max} are allowed",
            text.len()
        ));
    }
    if text.contains('\0') {
        return Err(format!(
            "{what} holds a NUL character, which no stored job has"
        ));
    }
    Ok(())
}
