//! Pausing a queue from the dashboard stops a running worker claiming from it; resuming lets
//! it run the waiting job.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::JobStatus;
use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;

use crate::browser::Browser;
use crate::support::{Gate, Ping, paused_queues, serve, status, wait_for_status, worker};

/// Longer than the bound on a pause reaching every worker (a second) plus a poll: a worker that
/// still claimed from the paused queue would have done so by then.
const PAUSE_REACHES_EVERY_WORKER: Duration = Duration::from_millis(2_500);

#[tokio::test]
async fn pausing_a_queue_from_the_dashboard_stops_the_worker_claiming_from_it() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let handle = worker(&client, &["pings"], Arc::new(Gate::default()));
    // The queue shows on the overview once it has a job; run one through first.
    let first = client.enqueue(Ping { n: 1 }).await.unwrap().id();
    wait_for_status(&client, first, JobStatus::Completed).await;
    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    browser.goto(&served.url).await;
    browser
        .click("tr[data-queue=pings] button[value=pause]")
        .await;
    let report = browser.text("#report").await;
    assert!(report.contains("Paused queue pings."), "{report}");
    assert_eq!(paused_queues(&client).await, ["pings"]);

    let waiting = client.enqueue(Ping { n: 2 }).await.unwrap().id();
    // Long enough for any claim to have happened: the worker must not have made one.
    tokio::time::sleep(PAUSE_REACHES_EVERY_WORKER).await;
    assert_eq!(status(&client, waiting).await, JobStatus::Pending);

    browser.click("#back").await;
    let row = browser.text("tr[data-queue=pings]").await;
    assert!(row.contains("paused"), "{row}");
    browser
        .click("tr[data-queue=pings] button[value=resume]")
        .await;
    let report = browser.text("#report").await;
    assert!(report.contains("Resumed queue pings."), "{report}");
    wait_for_status(&client, waiting, JobStatus::Completed).await;

    browser.close().await;
    handle.shutdown().await.unwrap();
}
