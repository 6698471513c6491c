//! The trace context from enqueue to handler (the `opentelemetry` feature): the enqueue keeps
//! the current span's W3C `traceparent` in the job's meta, and the attempt's span continues
//! that trace, so that a trace shows the request, then the job. Spans are exported to the
//! OpenTelemetry SDK's in-memory exporter.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use pgq_core::{
    Handler, JobContext, JobOutcome, Task, TaskError, Worker, WorkerEvent, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;

const LIMIT: Duration = Duration::from_secs(20);

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "traced")]
struct Traced {
    order: u32,
}

#[async_trait]
impl Handler for Traced {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        let _inner = tracing::info_span!("charge the card").entered();
        Ok(())
    }
}

#[tokio::test]
async fn the_jobs_span_continues_the_trace_of_the_request_that_enqueued_it() {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("pgq-test")));
    tracing::subscriber::set_global_default(subscriber).expect("the only subscriber");

    let db = TestDatabase::new().await;
    let client = db.client();
    let request = tracing::info_span!("POST /orders");
    let id = client
        .enqueue(Traced { order: 42 })
        .instrument(request.clone())
        .await
        .unwrap()
        .id();
    drop(request);

    let job = client.job(id).await.unwrap().unwrap();
    let traceparent = job.meta.as_ref().unwrap()["trace"]["traceparent"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(traceparent.starts_with("00-"), "{traceparent}");
    // A context without a tracestate stores none (not an empty one).
    let trace = &job.meta.as_ref().unwrap()["trace"];
    assert_eq!(trace.as_object().unwrap().len(), 1, "{trace}");

    let worker = Worker::builder(client.clone())
        .queue("traced", 1)
        .poll_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let outcome = tokio::time::timeout(LIMIT, async {
        loop {
            if let Ok(WorkerEvent::JobFinished {
                id: done, outcome, ..
            }) = events.recv().await
                && done == id
            {
                return outcome;
            }
        }
    })
    .await
    .expect("the job ends");
    assert_eq!(outcome, JobOutcome::Completed);
    handle.shutdown().await.unwrap();
    provider.force_flush().unwrap();

    let spans = exporter.get_finished_spans().unwrap();
    let named = |name: &str| {
        spans.iter().find(|s| s.name == name).unwrap_or_else(|| {
            panic!(
                "no span {name:?} among {:?}",
                spans.iter().map(|s| &s.name).collect::<Vec<_>>()
            )
        })
    };
    let request = named("POST /orders");
    let job_span = named("process traced");
    let inner = named("charge the card");
    let trace_id = request.span_context.trace_id();
    assert_eq!(job_span.span_context.trace_id(), trace_id, "one trace");
    assert_eq!(job_span.parent_span_id, request.span_context.span_id());
    assert_eq!(inner.parent_span_id, job_span.span_context.span_id());
    assert!(traceparent.contains(&trace_id.to_string()), "{traceparent}");
    let outcome = job_span
        .attributes
        .iter()
        .find(|kv| kv.key.as_str() == "job.outcome")
        .map(|kv| kv.value.to_string());
    assert_eq!(outcome.as_deref(), Some("completed"));

    // A schedule's job belongs to no caller's trace, whatever span its schedule was read in.
    let mut clock = pgq_testkit::ScheduleClock::start(&client, chrono::Utc::now())
        .await
        .with(pgq_core::Schedule::cron("0 * * * * *"), || Traced {
            order: 7,
        })
        .await;
    let tick = clock
        .next_tick()
        .instrument(tracing::info_span!("startup"))
        .await
        .expect("a minutely schedule ticks");
    let job = client.job(tick.jobs[0]).await.unwrap().unwrap();
    let meta = job
        .meta
        .expect("a schedule's job is tagged with its schedule");
    assert!(meta.get("trace").is_none(), "{meta}");
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "traced", unique_key = "order:{order}")]
struct Reprice {
    order: u32,
    cents: u32,
}

#[async_trait]
impl Handler for Reprice {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// A replace made in a traced request takes that request's trace, and keeps the tags of the job
/// it replaces: the trace context is metadata too, and must not push the tags out.
#[tokio::test]
async fn a_replace_in_a_traced_request_keeps_the_jobs_tags() {
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(InMemorySpanExporter::default())
        .build();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("pgq-test")));
    // This test's thread only: the other test sets the process's subscriber.
    let _subscriber = tracing::subscriber::set_default(subscriber);

    let db = TestDatabase::new().await;
    let client = db.client();
    let tagged = pgq_core::EnqueueOptions::default().tag("tenant", "acme");
    let id = client
        .enqueue_with(
            Reprice {
                order: 7,
                cents: 100,
            },
            tagged,
        )
        .await
        .unwrap()
        .id();
    let request = tracing::info_span!("PUT /orders/7");
    let replace = pgq_core::EnqueueOptions::default().replace();
    let replaced = client
        .enqueue_with(
            Reprice {
                order: 7,
                cents: 120,
            },
            replace,
        )
        .instrument(request)
        .await
        .unwrap();
    assert_eq!(replaced, pgq_core::Enqueued::Replaced(id));

    let job = client.job(id).await.unwrap().unwrap();
    let meta = job.meta.unwrap();
    assert_eq!(meta["tags"]["tenant"], "acme", "{meta}");
    assert!(
        meta["trace"]["traceparent"]
            .as_str()
            .unwrap()
            .starts_with("00-"),
        "{meta}"
    );
    assert_eq!(job.payload["cents"], 120);

    // Tags the replace names take the place of the job's.
    let retagged = pgq_core::EnqueueOptions::default()
        .replace()
        .tag("tier", "gold");
    client
        .enqueue_with(
            Reprice {
                order: 7,
                cents: 130,
            },
            retagged,
        )
        .await
        .unwrap();
    let tags = client.job(id).await.unwrap().unwrap().meta.unwrap()["tags"].clone();
    assert_eq!(tags, serde_json::json!({"tier": "gold"}));

    // Tags that leave no room for a trace context: the replace keeps them, and no trace.
    let full = (0..16).fold(pgq_core::EnqueueOptions::default(), |options, n| {
        options.tag(format!("t{n:02}"), "v".repeat(240))
    });
    let crowded = client
        .enqueue_with(
            Reprice {
                order: 8,
                cents: 100,
            },
            full,
        )
        .await
        .unwrap()
        .id();
    client
        .enqueue_with(
            Reprice {
                order: 8,
                cents: 110,
            },
            pgq_core::EnqueueOptions::default().replace(),
        )
        .instrument(tracing::info_span!("PUT /orders/8"))
        .await
        .unwrap();
    let job = client.job(crowded).await.unwrap().unwrap();
    let meta = job.meta.unwrap();
    assert_eq!(meta["tags"].as_object().unwrap().len(), 16, "{meta}");
    assert_eq!(job.payload["cents"], 110);
}
