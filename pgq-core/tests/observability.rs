//! What a worker tells through `tracing`: a span per attempt that the handler's own log lines
//! carry, and one log line per outcome. Its own test binary: the capturing subscriber is global,
//! since a worker runs on threads of its own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pgq_core::{Handler, JobContext, JobId, Task, TaskError, Worker, WorkerEvent, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

const LIMIT: Duration = Duration::from_secs(20);

/// A log line as captured: its level, message and fields, and the fields of every span it was
/// written in (innermost first), by span name.
#[derive(Debug, Clone)]
struct Line {
    level: Level,
    message: String,
    fields: HashMap<String, String>,
    spans: Vec<(String, HashMap<String, String>)>,
    /// The names of each of those spans' fields in declaration order: the order a formatting
    /// subscriber prints them in.
    declared: Vec<(String, Vec<&'static str>)>,
}

impl Line {
    fn span(&self, name: &str) -> Option<&HashMap<String, String>> {
        self.spans.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }

    fn declared(&self, name: &str) -> &[&'static str] {
        self.declared
            .iter()
            .find(|(n, _)| n == name)
            .map_or(&[], |(_, names)| names)
    }
}

/// A span once closed: its name and final fields.
type ClosedSpan = (String, HashMap<String, String>);

#[derive(Default)]
struct Fields(HashMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

/// Keeps every span's fields (with what was recorded later) and every log line.
struct Capture {
    lines: Arc<Mutex<Vec<Line>>>,
    /// Spans by name once closed, with their final fields.
    closed: Arc<Mutex<Vec<ClosedSpan>>>,
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Capture {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        let spans = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .map(|span| {
                        let fields = span
                            .extensions()
                            .get::<Fields>()
                            .map(|f| f.0.clone())
                            .unwrap_or_default();
                        (span.name().to_owned(), fields)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let declared = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .map(|span| {
                        let names = span.metadata().fields().iter().map(|f| f.name());
                        (span.name().to_owned(), names.collect())
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.lines.lock().unwrap().push(Line {
            level: *event.metadata().level(),
            message,
            fields: fields.0,
            spans,
            declared,
        });
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id) {
            let fields = span
                .extensions()
                .get::<Fields>()
                .map(|f| f.0.clone())
                .unwrap_or_default();
            self.closed
                .lock()
                .unwrap()
                .push((span.name().to_owned(), fields));
        }
    }
}

fn is(fields: &HashMap<String, String>, id: JobId, worker: &str) -> bool {
    fields.get("job.id") == Some(&id.to_string())
        && fields.get("worker.id").map(String::as_str) == Some(worker)
}

struct Captured {
    lines: Arc<Mutex<Vec<Line>>>,
    closed: Arc<Mutex<Vec<ClosedSpan>>>,
}

impl Captured {
    /// The lines written inside the attempt spans of job `id` run by `worker` (tests run in
    /// parallel, each in a database of its own, where ids start over).
    fn of_job(&self, id: JobId, worker: &str) -> Vec<Line> {
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter(|line| line.span("pgq.job").is_some_and(|f| is(f, id, worker)))
            .cloned()
            .collect()
    }

    /// The closed attempt spans of job `id` run by `worker`, with their final fields.
    fn job_spans(&self, id: JobId, worker: &str) -> Vec<HashMap<String, String>> {
        self.closed
            .lock()
            .unwrap()
            .iter()
            .filter(|(name, fields)| name == "pgq.job" && is(fields, id, worker))
            .map(|(_, fields)| fields.clone())
            .collect()
    }
}

/// One subscriber for the whole binary, capturing DEBUG and above.
fn captured() -> &'static Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let closed = Arc::new(Mutex::new(Vec::new()));
        let capture = Capture {
            lines: lines.clone(),
            closed: closed.clone(),
        };
        let subscriber = tracing_subscriber::registry()
            .with(capture.with_filter(tracing_subscriber::filter::LevelFilter::DEBUG));
        tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");
        Captured { lines, closed }
    })
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "observed", max_attempts = 2)]
struct Observed {
    fail: bool,
}

#[async_trait]
impl Handler for Observed {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        tracing::info!(attempt = ctx.attempt(), "handling the observed job");
        // Across an await: the span stays entered for the handler's whole future.
        tokio::task::yield_now().await;
        tracing::info!("still handling");
        if self.fail {
            return Err(TaskError::retry("the partner answered 503"));
        }
        Ok(())
    }

    fn backoff(_attempt: i32) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

/// Runs one job to its end on a fresh worker and returns its id and the worker's id.
async fn run_one(fail: bool) -> (JobId, String) {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Observed { fail }).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("observed", 1)
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let worker_id = worker.worker_id().to_owned();
    let mut events = worker.events();
    let handle = worker.start();
    let last_attempt = if fail { 2 } else { 1 };
    tokio::time::timeout(LIMIT, async {
        loop {
            if let Ok(WorkerEvent::JobFinished {
                id: finished,
                attempt,
                ..
            }) = events.recv().await
                && finished == id
                && attempt == last_attempt
            {
                return;
            }
        }
    })
    .await
    .expect("the job ends");
    handle.shutdown().await.unwrap();
    (id, worker_id)
}

#[tokio::test]
async fn a_handlers_log_lines_carry_the_attempts_span_and_its_fields() {
    let captured = captured();
    let (id, worker_id) = run_one(false).await;
    let lines = captured.of_job(id, &worker_id);
    let handling: Vec<&Line> = lines
        .iter()
        .filter(|l| l.message.contains("handling"))
        .collect();
    assert_eq!(
        handling.len(),
        2,
        "both lines, before and after an await: {lines:#?}"
    );
    let span = handling[1].span("pgq.job").unwrap();
    assert_eq!(span["job.task"], "Observed");
    assert_eq!(span["messaging.destination.name"], "observed");
    assert_eq!(span["messaging.system"], "pgq");
    assert_eq!(span["messaging.operation.type"], "process");
    assert_eq!(span["job.attempt"], "1");
    assert_eq!(span["worker.id"], worker_id);
    assert_eq!(
        handling[1].declared("pgq.job")[..4],
        ["job.id", "job.task", "job.attempt", "worker.id"],
        "a log line shows the job's own fields first, as the docs' example does"
    );

    // Success logs at DEBUG only, with how long the job waited and ran.
    let done = lines
        .iter()
        .find(|l| l.message == "job completed")
        .expect("a line for the outcome");
    assert_eq!(done.level, Level::DEBUG);
    assert!(done.fields.contains_key("waited_ms") && done.fields.contains_key("ran_ms"));
    let quiet: Vec<&Line> = lines
        .iter()
        .filter(|l| l.level <= Level::INFO && !l.message.contains("handling"))
        .collect();
    assert!(
        quiet.is_empty(),
        "pgq logs nothing above DEBUG for a success: {quiet:#?}"
    );

    let spans = captured.job_spans(id, &worker_id);
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0]["job.outcome"], "completed");
}

#[tokio::test]
async fn a_retry_warns_with_the_next_run_and_a_final_failure_is_an_error() {
    let captured = captured();
    let (id, worker_id) = run_one(true).await;
    let lines = captured.of_job(id, &worker_id);
    let retry = lines
        .iter()
        .find(|l| l.level == Level::WARN)
        .unwrap_or_else(|| panic!("a warning for the retry: {lines:#?}"));
    assert!(retry.message.contains("will retry"), "{retry:?}");
    assert!(retry.fields["error"].contains("503"), "{retry:?}");
    assert!(retry.fields.contains_key("retry_at"), "{retry:?}");
    assert_eq!(retry.span("pgq.job").unwrap()["job.attempt"], "1");

    let failed = lines
        .iter()
        .find(|l| l.level == Level::ERROR)
        .unwrap_or_else(|| panic!("an error for the failure: {lines:#?}"));
    assert!(failed.message.contains("failed for good"), "{failed:?}");
    assert!(failed.fields["error"].contains("503"), "{failed:?}");
    assert_eq!(failed.span("pgq.job").unwrap()["job.attempt"], "2");

    let mut outcomes: Vec<String> = captured
        .job_spans(id, &worker_id)
        .iter()
        .map(|f| f["job.outcome"].clone())
        .collect();
    outcomes.sort();
    assert_eq!(outcomes, ["failed", "retried"]);
}

#[tokio::test]
async fn enqueues_and_ticks_have_debug_spans() {
    let captured = captured();
    run_one(false).await;
    let closed = captured.closed.lock().unwrap().clone();
    let named = |name: &str| closed.iter().filter(|(n, _)| n == name).count();
    assert!(named("pgq.enqueue") >= 1, "{closed:#?}");
    assert!(named("pgq.tick") >= 1, "{closed:#?}");
    let enqueue = closed
        .iter()
        .find(|(n, f)| {
            n == "pgq.enqueue"
                && f.get("messaging.destination.name").map(String::as_str) == Some("observed")
        })
        .expect("the enqueue's span names its queue");
    assert_eq!(enqueue.1["messaging.operation.type"], "send");
}
