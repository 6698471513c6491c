//! [`Inline`]: the inline testing mode, where an enqueue runs its job before it returns,
//! without a worker. The manual mode, where jobs wait for a [`drain`](crate::drain), is
//! every client's default.

use std::fmt;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures_util::FutureExt as _;
use futures_util::future::BoxFuture;
use pgq_core::__testkit::InlineRunner;
use pgq_core::{Client, WorkerBuilder, limits};

use crate::drain::{Configure, Drain};

/// How deep jobs that enqueue jobs may nest before the test fails: a job that enqueues itself
/// without end would otherwise recurse until the stack overflows.
pub const MAX_INLINE_DEPTH: usize = 32;

/// The inline testing mode: [`client`](Self::client) returns a client whose enqueues, once
/// written, run the due jobs of the enqueued task's queue through their real handlers before
/// returning, as a drain does — for application tests that want a job's effects right after
/// the code under test enqueues it.
///
/// What runs inline: the enqueues that commit on their own (`enqueue`, `enqueue_with`,
/// `enqueue_many`, `enqueue_many_with`), and the jobs those jobs enqueue in turn. A job
/// enqueued inside your transaction (the `_in` forms) is invisible until the transaction
/// commits, so it waits for a drain, as in the manual mode; so does a job scheduled for later.
/// A failed attempt is recorded on its job as in production (assert on
/// [`Client::job`](pgq_core::Client::job)); a handler's panic fails the test unless
/// [`with_safety`](Self::with_safety) is `true`.
///
/// ```no_run
/// # use pgq_core::{async_trait, Handler, JobContext, Task, TaskError};
/// # #[derive(serde::Serialize, serde::Deserialize, Task)]
/// # #[task(queue = "email")] struct Welcome { user_id: i64 }
/// # #[async_trait] impl Handler for Welcome {
/// #     async fn handle(self, _: &JobContext) -> Result<(), TaskError> { Ok(()) }
/// # }
/// # async fn example(db: pgq_testkit::TestDatabase) {
/// let client = pgq_testkit::Inline::new().client(&db.client());
/// let id = client.enqueue(Welcome { user_id: 1 }).await.unwrap().id();
/// // The job already ran.
/// let job = client.job(id).await.unwrap().unwrap();
/// assert_eq!(job.status, pgq_core::JobStatus::Completed);
/// # }
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct Inline {
    configure: Option<Configure>,
    safety: bool,
}

impl fmt::Debug for Inline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inline")
            .field("safety", &self.safety)
            .finish_non_exhaustive()
    }
}

impl Inline {
    /// The inline mode, with panics failing the test and no handler state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Configures the worker that runs the jobs: the state its handlers read with
    /// `ctx.state::<S>()`, mostly. Called for every enqueue.
    pub fn worker(
        mut self,
        configure: impl Fn(WorkerBuilder) -> WorkerBuilder + Send + Sync + 'static,
    ) -> Self {
        self.configure = Some(Arc::new(configure));
        self
    }

    /// Whether a handler's panic is recorded as the failed attempt it is in production
    /// (`true`), or fails the test at once (`false`, the default here).
    pub fn with_safety(mut self, safety: bool) -> Self {
        self.safety = safety;
        self
    }

    /// A client on `client`'s database whose enqueues run their jobs at once. `client` itself
    /// stays as it was; [`manual`] turns an inline client back.
    pub fn client(self, client: &Client) -> Client {
        let runner = Runner {
            inline: self,
            depth: 1,
            shared: None,
        };
        client.clone().with_inline_runner(Some(Arc::new(runner)))
    }
}

/// `client` in the manual mode, the default: enqueued jobs wait for a worker or a drain.
pub fn manual(client: &Client) -> Client {
    client.clone().with_inline_runner(None)
}

#[derive(Debug)]
struct Runner {
    inline: Inline,
    /// How deep this runner's runs are: 1 for the client's own enqueues, one more for each
    /// level of jobs enqueued by inline jobs.
    depth: usize,
    /// What the runs of one enqueue share (`None` for the client's own runner: each of its
    /// enqueues makes one), so that enqueues running at once count as siblings, not as nesting.
    shared: Option<Arc<Shared>>,
}

/// What stops every run of one enqueue and fails the test at that enqueue.
#[derive(Debug, Default)]
struct Shared {
    /// Set when the runs should stop after their current job.
    stop: AtomicBool,
    /// Set when the jobs nest deeper than [`MAX_INLINE_DEPTH`].
    too_deep: AtomicBool,
    /// What failed the test in a nested run. Such a panic unwinds into the handler of the job
    /// whose enqueue started that run, where the worker would record it as that job's failed
    /// attempt (and, with safety on, go on): it is kept for the enqueue that started it all.
    failed: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, message: String) {
        if let Ok(mut failed) = self.failed.lock() {
            failed.get_or_insert(message);
        }
        self.stop.store(true, Ordering::SeqCst);
    }
}

impl InlineRunner<Client> for Runner {
    fn run<'a>(
        &'a self,
        client: &'a Client,
        queue: &'a str,
    ) -> BoxFuture<'a, pgq_core::Result<()>> {
        Box::pin(async move {
            let shared = self.shared.clone().unwrap_or_default();
            if self.depth > MAX_INLINE_DEPTH {
                // Not a panic here: the worker running the enqueuing job would record it as
                // that job's failure and go on with the next one.
                shared.too_deep.store(true, Ordering::SeqCst);
                shared.stop.store(true, Ordering::SeqCst);
                return Ok(());
            }
            let runs = self.run_all(client, queue, &shared);
            if self.depth > 1 {
                if let Err(panic) = AssertUnwindSafe(runs).catch_unwind().await {
                    shared.fail(panic_message(panic.as_ref()));
                    // Without safety the panic goes on through the enqueuing handler, which
                    // stops there, and the drain above fails the test with both messages.
                    if !self.inline.safety {
                        std::panic::resume_unwind(panic);
                    }
                }
                return Ok(());
            }
            runs.await;
            if let Some(message) = shared.failed.lock().ok().and_then(|mut f| f.take()) {
                panic!("{message}");
            }
            if shared.too_deep.load(Ordering::SeqCst) {
                panic!(
                    "inline jobs of queue {queue:?} enqueued jobs more than {MAX_INLINE_DEPTH} \
                     deep: does a job enqueue itself?"
                );
            }
            Ok(())
        })
    }
}

impl Runner {
    /// Runs the due jobs of `queue` one attempt at a time until none is left or the runs stop.
    async fn run_all(&self, client: &Client, queue: &str, shared: &Arc<Shared>) {
        // The jobs these jobs enqueue, with `ctx.enqueue` on the worker's client, run inline a
        // level deeper.
        let nested = client.clone().with_inline_runner(Some(Arc::new(Runner {
            inline: self.inline.clone(),
            depth: self.depth + 1,
            shared: Some(shared.clone()),
        })));
        // One attempt at a time, so that a run stops as soon as the jobs nest too deep; as many
        // as a drain runs at most, so that a job that snoozes again and again, or retries at
        // once, fails the test instead of hanging it.
        let mut attempts = 0;
        while !shared.stop.load(Ordering::SeqCst) {
            let ran = Drain::new(&nested)
                .queue(queue)
                .with_safety(self.inline.safety)
                .configured(self.inline.configure.clone())
                .limit(1)
                .run()
                .await;
            if ran.is_empty() {
                break;
            }
            attempts += ran.len();
            assert!(
                attempts <= limits::DRAIN_LIMIT,
                "inline jobs of queue {queue:?} ran more than {} attempts for one enqueue: \
                 does a job snooze or retry at once for ever?",
                limits::DRAIN_LIMIT
            );
        }
    }
}

/// A panic's message, as the panic hook prints it.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|message| (*message).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a nested inline run panicked".to_owned())
}
