//! [`drain`]: run every due job of a queue inline, through the real handlers; [`Drain`] with
//! options.

use std::fmt;
use std::sync::Arc;

use pgq_core::{Client, DrainedJob, WorkerBuilder};

/// What a test adds to a draining worker: handler state, mostly.
pub(crate) type Configure = Arc<dyn Fn(WorkerBuilder) -> WorkerBuilder + Send + Sync>;

/// Runs every due job of `queue` through its handler, one at a time, until none is due, and
/// returns what each attempt did. Jobs that retry at once run again within the same drain;
/// make delayed ones due first with [`TestDatabase::advance`](crate::TestDatabase::advance).
///
/// ```no_run
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// let drained = pgq_testkit::drain(&db.client(), "email").await;
/// assert!(drained.iter().all(|job| job.outcome == pgq_core::JobOutcome::Completed));
/// # }
/// ```
pub async fn drain(client: &Client, queue: &str) -> Vec<DrainedJob> {
    let drained = drain_with(pgq_core::Worker::builder(client.clone()).queue(queue, 1)).await;
    check_leftovers(client, &[queue.to_owned()], &drained).await;
    drained
}

/// Fails the test where a drain would let it pass by mistake: due jobs left in a drained queue
/// that no handler linked into this binary runs, and a queue the drain ran nothing in that no
/// linked task declares and no job is in (a mistyped name).
async fn check_leftovers(client: &Client, queues: &[String], drained: &[DrainedJob]) {
    let registry = pgq_core::Registry::linked()
        .unwrap_or_else(|err| panic!("cannot read the linked tasks: {err}"));
    let runnable: Vec<&str> = registry
        .tasks()
        .filter(|task| task.has_handler())
        .map(|task| task.name())
        .collect();
    let leftovers = pgq_core::__testkit::leftovers(client, queues, &runnable)
        .await
        .unwrap_or_else(|err| panic!("cannot check what the drain left: {err}"));
    for (queue, used, stranded) in leftovers {
        if !stranded.is_empty() {
            panic!(
                "the drain left due jobs in queue {queue:?} that no handler linked into this \
                 binary runs: {}",
                stranded.join(", ")
            );
        }
        let declared = registry.tasks().any(|task| task.queue() == queue);
        let ran_nothing = !drained.iter().any(|job| job.queue == queue);
        if ran_nothing && !used && !declared {
            panic!(
                "nothing to drain in queue {queue:?}: no task linked into this binary declares \
                 it and it holds no job (a mistyped queue name?)"
            );
        }
    }
}

/// [`drain`] with a worker builder of your own: several queues, or handler state.
///
/// ```no_run
/// # struct Billing { review_above_cents: i64 }
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// let builder = pgq_core::Worker::builder(db.client())
///     .queue("billing", 1)
///     .queue("email", 1)
///     .state(Billing { review_above_cents: 100_000 });
/// let drained = pgq_testkit::drain_with(builder).await;
/// # }
/// ```
pub async fn drain_with(builder: WorkerBuilder) -> Vec<DrainedJob> {
    builder
        .build()
        .unwrap_or_else(|err| panic!("cannot build the draining worker: {err}"))
        .drain()
        .await
        .unwrap_or_else(|err| panic!("drain failed: {err}"))
}

/// A drain with options: which queues, whether scheduled jobs run too, whether a handler's
/// panic fails the test, and how many attempts at most. Jobs that drained jobs enqueue are
/// drained too (recursion), within the bound.
///
/// ```no_run
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// use pgq_testkit::Drain;
///
/// // Signup enqueues a welcome mail and a reminder for tomorrow; run all of it now, and let a
/// // handler's panic fail this test instead of becoming a retry.
/// let drained = Drain::new(&db.client())
///     .queue("signup")
///     .queue("email")
///     .with_scheduled(true)
///     .with_safety(false)
///     .run()
///     .await;
/// assert_eq!(drained.len(), 3);
/// # }
/// ```
#[derive(Clone)]
#[must_use]
pub struct Drain {
    client: Client,
    queues: Vec<String>,
    scheduled: bool,
    safety: bool,
    limit: usize,
    configure: Option<Configure>,
}

impl fmt::Debug for Drain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drain")
            .field("queues", &self.queues)
            .field("scheduled", &self.scheduled)
            .field("safety", &self.safety)
            .field("limit", &self.limit)
            .finish_non_exhaustive()
    }
}

impl Drain {
    /// A drain on `client`'s database; name its queues with [`queue`](Self::queue).
    pub fn new(client: &Client) -> Self {
        Self {
            client: client.clone(),
            queues: Vec::new(),
            scheduled: false,
            safety: true,
            limit: pgq_core::limits::DRAIN_LIMIT,
            configure: None,
        }
    }

    /// Configures the draining worker beyond its queues: the state its handlers read with
    /// `ctx.state::<S>()`, mostly.
    ///
    /// ```no_run
    /// # #[derive(Clone)] struct Mailer;
    /// # async fn example(db: pgq_testkit::TestDatabase) {
    /// let drained = pgq_testkit::Drain::new(&db.client())
    ///     .queue("email")
    ///     .worker(|builder| builder.state(Mailer))
    ///     .run()
    ///     .await;
    /// # }
    /// ```
    pub fn worker(
        mut self,
        configure: impl Fn(WorkerBuilder) -> WorkerBuilder + Send + Sync + 'static,
    ) -> Self {
        self.configure = Some(Arc::new(configure));
        self
    }

    pub(crate) fn configured(mut self, configure: Option<Configure>) -> Self {
        self.configure = configure;
        self
    }

    /// Drains this queue too.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queues.push(queue.into());
        self
    }

    /// Whether jobs scheduled for later (delayed, backing off before a retry) run too, as if
    /// their time had come (default `false`: only due jobs).
    pub fn with_scheduled(mut self, scheduled: bool) -> Self {
        self.scheduled = scheduled;
        self
    }

    /// Whether a handler's panic is recorded as the failed attempt it is in production
    /// (`true`, the default) or fails the test at once with the handler's message (`false`):
    /// no attempt runs after the one that panicked, whose outcome is written as a worker
    /// writes it.
    pub fn with_safety(mut self, safety: bool) -> Self {
        self.safety = safety;
        self
    }

    /// At most this many attempts (default [`DRAIN_LIMIT`](pgq_core::limits::DRAIN_LIMIT)):
    /// a bound for jobs that keep enqueueing jobs. A larger one runs rounds of at most that
    /// many until it is reached or nothing is due.
    pub fn limit(mut self, attempts: usize) -> Self {
        assert!(
            attempts > 0,
            "Drain::limit(0): a drain runs at least one attempt"
        );
        self.limit = attempts;
        self
    }

    /// One draining worker over `queues`, run for at most `limit` attempts.
    async fn round(&self, queues: &[String], limit: usize) -> Vec<DrainedJob> {
        let mut builder = queues.iter().fold(
            pgq_core::Worker::builder(self.client.clone()),
            |builder, queue| builder.queue(queue, 1),
        );
        if let Some(configure) = &self.configure {
            builder = configure(builder);
        }
        builder
            .build()
            .unwrap_or_else(|err| panic!("cannot build the draining worker: {err}"))
            .drain_at_most(limit)
            .await
            .unwrap_or_else(|err| panic!("drain failed: {err}"))
    }

    /// Runs the drain and returns every attempt it ran, in order.
    pub async fn run(self) -> Vec<DrainedJob> {
        assert!(
            !self.queues.is_empty(),
            "name the queues to drain with Drain::queue"
        );
        let mut drained: Vec<DrainedJob> = Vec::new();
        // A queue named twice stays twice: the worker's build refuses it, as the docs say.
        let mut by_name = self.queues.clone();
        by_name.sort();
        loop {
            if self.scheduled {
                pgq_core::__testkit::make_queues_due(&self.client, &self.queues)
                    .await
                    .unwrap_or_else(|err| panic!("cannot make scheduled jobs due: {err}"));
            }
            let round = if self.safety {
                self.round(&by_name, self.limit - drained.len()).await
            } else {
                // One attempt a round, so that none runs after a panic. The queues still take
                // turns: the round starts with the queue after the last one that ran a job.
                let turn = drained.last().map_or(0, |last| {
                    by_name
                        .iter()
                        .position(|q| *q == last.queue)
                        .map_or(0, |i| i + 1)
                });
                let (before, from) = by_name.split_at(turn.min(by_name.len()));
                let mut round = Vec::new();
                for queues in [from, before] {
                    if round.is_empty() && !queues.is_empty() {
                        round = self.round(queues, 1).await;
                    }
                }
                round
            };
            let round_limit = if self.safety {
                self.limit - drained.len()
            } else {
                1
            };
            if !self.safety
                && let Some(panicked) = round.iter().find(|job| {
                    job.error
                        .as_deref()
                        .is_some_and(|e| e.starts_with("handler panicked: "))
                })
            {
                panic!(
                    "job {} ({}) {}",
                    panicked.id,
                    panicked.task,
                    panicked.error.as_deref().unwrap_or_default()
                );
            }
            let ran = !round.is_empty();
            let cut_short = round.len() >= round_limit.min(pgq_core::limits::DRAIN_LIMIT);
            drained.extend(round);
            if drained.len() >= self.limit {
                return drained;
            }
            // A round that stopped at its bound (one attempt without safety, a worker's drain
            // limit) may have left due jobs.
            if ran && cut_short {
                continue;
            }
            // A round may leave jobs for later (retries backing off, jobs enqueued with a
            // delay): with scheduled jobs included, run rounds until one runs nothing.
            if !(self.scheduled && ran) {
                check_leftovers(&self.client, &self.queues, &drained).await;
                return drained;
            }
        }
    }
}
