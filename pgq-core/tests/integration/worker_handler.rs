//! Handlers get their typed task and context; a worker claims only tasks it can handle.

use std::sync::{Arc, Mutex};

use pgq_core::{Handler, JobContext, JobOutcome, JobStatus, Task, TaskError, Worker, async_trait};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "handler-test", unique_key = "greet:{name}")]
struct Greet {
    name: String,
}

/// No handler in this binary: workers must leave it alone.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "handler-test", priority = 1000)]
struct HandledElsewhere {
    n: i32,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "handler-test")]
struct Plain {
    n: i32,
}

/// What handlers saw, shared through the worker's state.
#[derive(Default)]
struct Seen(Mutex<Vec<String>>);

#[async_trait]
impl Handler for Greet {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let seen = ctx
            .state::<Arc<Seen>>()
            .expect("state given to the builder");
        seen.0.lock().unwrap().push(format!(
            "{} {} {} {} {} {}",
            self.name,
            ctx.id(),
            ctx.attempt(),
            ctx.task(),
            ctx.queue(),
            ctx.idempotency_key()
        ));
        Ok(())
    }
}

#[async_trait]
impl Handler for Plain {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        let seen = ctx
            .state::<Arc<Seen>>()
            .expect("state given to the builder");
        seen.0.lock().unwrap().push(ctx.idempotency_key());
        Ok(())
    }
}

#[tokio::test]
async fn a_handler_gets_the_typed_task_and_its_context() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let greet = client
        .enqueue(Greet { name: "ada".into() })
        .await
        .unwrap()
        .id();
    let plain = client.enqueue(Plain { n: 1 }).await.unwrap().id();
    let seen = Arc::new(Seen::default());
    let worker = Worker::builder(client.clone())
        .queue("handler-test", 2)
        .state(seen.clone())
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    assert_eq!(
        support::finished(&mut events, greet).await.0,
        JobOutcome::Completed
    );
    support::completed(&handle, 2).await;
    let worker_id = handle.worker_id().to_owned();
    handle.shutdown().await.unwrap();

    let mut seen = seen.0.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        vec![
            format!("ada {greet} 1 Greet handler-test Greet:greet:ada"),
            format!("pgq:job:{plain}"),
        ]
    );
    let job = client.job(greet).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Completed);
    assert_eq!(job.progress, 100);
    assert_eq!(job.attempts, 1);
    assert_eq!(job.worker_id, Some(worker_id));
    assert!(job.claimed_at.is_some() && job.started_at.is_some() && job.completed_at.is_some());
    assert_eq!(job.lease_expires_at, None);
}

#[tokio::test]
async fn a_worker_claims_only_tasks_it_has_handlers_for() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let foreign = client
        .enqueue(HandledElsewhere { n: 1 })
        .await
        .unwrap()
        .id();
    let plain = client.enqueue(Plain { n: 2 }).await.unwrap().id();
    let worker = Worker::builder(client.clone())
        .queue("handler-test", 1)
        .state(Arc::new(Seen::default()))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::finished(&mut events, plain).await;
    handle.shutdown().await.unwrap();
    let job = client.job(foreign).await.unwrap().unwrap();
    assert_eq!(job.status, JobStatus::Pending);
    assert_eq!(job.attempts, 0);
}
