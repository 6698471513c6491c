//! Idle workers wake on NOTIFY, not at the next poll, and keep listening after the listening
//! connection is killed.

use std::time::Duration;

use pgq_core::{
    Client, EnqueueOptions, Enqueued, Handler, JobContext, JobOutcome, Task, TaskError, Worker,
    WorkerEvent, WorkerHandle, async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

use crate::support;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "wakeup")]
struct Wake {
    n: u32,
}

#[async_trait]
impl Handler for Wake {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

const POLL: Duration = Duration::from_secs(3600);

/// A worker of `queue` that polls once an hour, so that only notifications wake it, once it
/// listens.
async fn listening_worker(
    client: &Client,
    queue: &str,
    concurrency: usize,
) -> (WorkerHandle, broadcast::Receiver<WorkerEvent>) {
    let worker = Worker::builder(client.clone())
        .queue(queue, concurrency)
        .poll_interval(POLL)
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    support::event(&mut events, |e| matches!(e, WorkerEvent::ListenerConnected)).await;
    (handle, events)
}

/// A connection of the test's own that hears every enqueue's notification.
async fn insert_listener(db: &TestDatabase) -> sqlx::postgres::PgListener {
    let mut listener = sqlx::postgres::PgListener::connect_with(db.pool())
        .await
        .unwrap();
    listener.listen("pgq_insert").await.unwrap();
    listener
}

#[tokio::test]
async fn an_idle_worker_starts_a_new_job_at_once_and_survives_a_killed_listener() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let (handle, mut events) = listening_worker(&client, "wakeup", 1).await;

    // The poll interval is an hour, so only the notification can start this job.
    let id = client.enqueue(Wake { n: 1 }).await.unwrap().id();
    let started = tokio::time::timeout(
        Duration::from_secs(5),
        support::event(
            &mut events,
            |e| matches!(e, WorkerEvent::JobStarted { id: s, .. } if *s == id),
        ),
    )
    .await;
    assert!(started.is_ok(), "job did not start on NOTIFY");
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );

    support::cut_listener(db.pool(), &mut events).await;

    let id = client.enqueue(Wake { n: 2 }).await.unwrap().id();
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_burst_of_enqueues_shares_notifications_and_every_job_starts_at_once() {
    let db = TestDatabase::new().await;
    // A wide window, so that the burst shares it however slowly the machine runs.
    let client = db.client().with_wakeup_window(Duration::from_secs(1));
    let mut listener = insert_listener(&db).await;
    let (handle, _events) = listening_worker(&client, "wakeup", 4).await;

    // 50 enqueues at once: the poll interval is an hour, so only notifications start them.
    let enqueues: Vec<_> = (0..50)
        .map(|n| {
            let client = client.clone();
            tokio::spawn(async move { client.enqueue(Wake { n }).await.unwrap().id() })
        })
        .collect();
    for enqueue in enqueues {
        enqueue.await.unwrap();
    }
    support::completed(&handle, 50).await;
    handle.shutdown().await.unwrap();

    let notifications = support::notifications_so_far(db.pool(), &mut listener, "pgq_insert").await;
    assert!(
        (1..=10).contains(&notifications),
        "{notifications} notifications for 50 enqueues"
    );
}

/// A task of the wake-up queue that no worker here handles: it stays pending, holding its key.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "wakeup", unique_key = "{key}")]
struct Holder {
    key: String,
}

#[tokio::test]
async fn a_duplicate_enqueue_never_swallows_a_wake_up_owed_to_an_earlier_job() {
    let db = TestDatabase::new().await;
    let window = Duration::from_millis(200);
    let client = db.client().with_wakeup_window(window);
    let (handle, mut events) = listening_worker(&client, "wakeup", 2).await;

    let holder = || Holder { key: "k".into() };
    assert!(!client.enqueue(holder()).await.unwrap().is_duplicate());
    // Inside the window: this job's notification is left to a later one.
    let owed = client.enqueue(Wake { n: 1 }).await.unwrap().id();
    // The window closes; the next enqueue is a duplicate, which writes no row and so notifies
    // nobody. The notification owed to the job above must still go out.
    tokio::time::sleep(window).await;
    assert!(client.enqueue(holder()).await.unwrap().is_duplicate());
    assert_eq!(
        support::finished(&mut events, owed).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
}

/// The first enqueue after a window would carry the window's notification, but it replaces a
/// pending job of another queue, whose queue it notifies: this queue's notification still goes
/// out, for the job left waiting in the window.
#[tokio::test]
async fn a_replace_in_another_queue_does_not_carry_this_queues_notification() {
    let db = TestDatabase::new().await;
    let window = Duration::from_secs(2);
    let client = db.client().with_wakeup_window(window);
    let holder = || Holder { key: "k".into() };
    client
        .enqueue_with(holder(), EnqueueOptions::default().queue("elsewhere"))
        .await
        .unwrap();
    let (handle, mut events) = listening_worker(&client, "wakeup", 1).await;

    let opened = tokio::time::Instant::now();
    client.enqueue(Wake { n: 1 }).await.unwrap();
    handle
        .stats()
        .wait_for(|st| st.completed >= 1)
        .await
        .unwrap();
    // The worker is idle; inside the window, this job's notification is left to a later one.
    let owed = client.enqueue(Wake { n: 2 }).await.unwrap().id();
    assert!(
        opened.elapsed() < window,
        "the window closed before the test could use it"
    );
    tokio::time::sleep_until(opened + window + window / 8).await;
    let replaced = client
        .enqueue_with(
            holder(),
            EnqueueOptions::default().queue("wakeup").replace(),
        )
        .await
        .unwrap();
    assert!(matches!(replaced, Enqueued::Replaced(_)), "{replaced:?}");
    assert_eq!(
        support::finished(&mut events, owed).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
}

/// A task of a unique key that a worker here handles.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "wakeup", unique_key = "{key}")]
struct Keyed {
    key: String,
}

#[async_trait]
impl Handler for Keyed {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        Ok(())
    }
}

/// A replace inside the window of the queue it names, of a job that waits in another queue,
/// wakes that other queue's workers: the job it makes due is theirs.
#[tokio::test]
async fn a_replace_wakes_the_queue_of_the_job_it_replaces() {
    let db = TestDatabase::new().await;
    let client = db.client().with_wakeup_window(Duration::from_secs(2));
    let later = EnqueueOptions::default()
        .queue("elsewhere")
        .delay(Duration::from_secs(3600));
    let id = client
        .enqueue_with(Keyed { key: "k".into() }, later)
        .await
        .unwrap()
        .id();
    let (handle, mut events) = listening_worker(&client, "elsewhere", 1).await;
    // Once this job is done, the worker is idle: only a notification starts the next.
    client
        .enqueue_with(Wake { n: 0 }, EnqueueOptions::default().queue("elsewhere"))
        .await
        .unwrap();
    handle
        .stats()
        .wait_for(|st| st.completed >= 1)
        .await
        .unwrap();

    // Opens a window on the wake-up queue, which no worker here serves.
    client.enqueue(Wake { n: 1 }).await.unwrap();
    let now = EnqueueOptions::default().queue("wakeup").replace();
    let replaced = client
        .enqueue_with(Keyed { key: "k".into() }, now)
        .await
        .unwrap();
    assert_eq!(replaced, Enqueued::Replaced(id));
    assert_eq!(
        support::finished(&mut events, id).await.0,
        JobOutcome::Completed
    );
    handle.shutdown().await.unwrap();
}

/// A batch wakes idle workers with one notification when its jobs are due, and with none when
/// they are not, or when it inserted nothing.
#[tokio::test]
async fn a_batch_notifies_once_when_due_and_never_when_it_inserts_nothing_due() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut listener = insert_listener(&db).await;

    client
        .enqueue_many((0..3).map(|n| Wake { n }))
        .await
        .unwrap();
    assert_eq!(
        support::notifications_so_far(db.pool(), &mut listener, "pgq_insert").await,
        1,
        "three due jobs, one notification"
    );

    let later = EnqueueOptions::default().delay(Duration::from_secs(3600));
    client
        .enqueue_many_with((0..3).map(|n| Wake { n }), later)
        .await
        .unwrap();
    assert_eq!(
        support::notifications_so_far(db.pool(), &mut listener, "pgq_insert").await,
        0,
        "jobs due in an hour wake nobody now"
    );

    let holders = || ["a", "b"].map(|key| Holder { key: key.into() });
    let enqueued = client.enqueue_many(holders()).await.unwrap();
    assert!(enqueued.iter().all(|e| !e.is_duplicate()));
    assert_eq!(
        support::notifications_so_far(db.pool(), &mut listener, "pgq_insert").await,
        1,
        "a keyed batch notifies too"
    );
    let enqueued = client.enqueue_many(holders()).await.unwrap();
    assert!(enqueued.iter().all(|e| e.is_duplicate()));
    assert_eq!(
        support::notifications_so_far(db.pool(), &mut listener, "pgq_insert").await,
        0,
        "a batch of duplicates inserts nothing to wake for"
    );
}

/// Under a steady load of overlapping enqueues, a notification still goes out every window: the
/// trailing one waits only for the enqueues deferred before its window closed. (It waited for
/// every deferred enqueue to return, which under such a load never happened: nothing was
/// notified until the load stopped, and idle workers found the jobs only when they polled.)
#[tokio::test]
async fn overlapping_enqueues_still_notify_every_window() {
    let db = TestDatabase::new().await;
    let client = db.client().with_wakeup_window(Duration::from_millis(10));
    let mut listener = insert_listener(&db).await;
    let heard = tokio::spawn(async move {
        let mut at = Vec::new();
        while let Ok(notification) = listener.recv().await {
            if notification.payload() == "marker" {
                break;
            }
            at.push(std::time::Instant::now());
        }
        at
    });

    // Four loops, each enqueueing as soon as its last enqueue returned: one is always in flight.
    let loops: Vec<_> = (0..4)
        .map(|_| {
            let client = client.clone();
            tokio::spawn(async move {
                for n in 0..200 {
                    client.enqueue(Wake { n }).await.unwrap();
                }
            })
        })
        .collect();
    for load in loops {
        load.await.unwrap();
    }
    let load_ended = std::time::Instant::now();
    sqlx::query("SELECT pg_notify('pgq_insert', 'marker')")
        .execute(db.pool())
        .await
        .unwrap();
    let heard = tokio::time::timeout(support::LIMIT, heard)
        .await
        .expect("the marker arrives")
        .unwrap();
    let during_load = heard.iter().filter(|&&at| at < load_ended).count();
    assert!(
        during_load >= 3,
        "{during_load} notifications during 800 overlapping enqueues, {} in all",
        heard.len()
    );
}

#[tokio::test]
async fn making_a_delayed_job_due_notifies_its_queue() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut listener = insert_listener(&db).await;
    // Not due: its enqueue wakes nobody.
    let later = EnqueueOptions::default().delay(Duration::from_secs(86_400));
    let id = client
        .enqueue_with(Wake { n: 1 }, later)
        .await
        .unwrap()
        .id();

    db.make_due(id).await;
    let heard = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("make_due woke no worker")
        .unwrap();
    assert_eq!(heard.payload(), "wakeup");
}
