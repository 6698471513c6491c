//! Every page loads with what it is for, and is saved as a screenshot: the queues, the job
//! list, a job, the workers, the schedules.

use std::sync::Arc;
use std::time::Duration;

use pgq_core::{EnqueueOptions, JobStatus};
use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;

use crate::browser::Browser;
use crate::support::{
    DELIVERY_ERROR, Deliver, Gate, Ping, Resize, eventually, serve, wait_for_status, worker,
};

/// Finished jobs spread over the last hour, as a busy hour leaves them: what the charts draw.
/// Inserted directly (the insert guard lifted meanwhile): the point is the history's shape.
async fn add_history(pool: &sqlx::PgPool) {
    let mut tx = pool.begin().await.unwrap();
    sqlx::raw_sql("ALTER TABLE pgq.jobs DISABLE TRIGGER jobs_guard_insert")
        .execute(&mut *tx)
        .await
        .unwrap();
    sqlx::raw_sql(
        "INSERT INTO pgq.jobs (task, queue, payload, status, phase, attempts, worker_id,
                               claimed_at, started_at, completed_at, progress, last_error)
         SELECT 'Ping', q.queue, jsonb_build_object('n', g),
                CASE WHEN g % 17 = 0 THEN 'failed' ELSE 'completed' END, 2, 1, 'history',
                at, at, at, 100,
                CASE WHEN g % 17 = 0 THEN 'upstream timed out' END
         FROM (VALUES ('pings', 900), ('mail', 300)) AS q(queue, n),
              generate_series(1, q.n) AS g,
              LATERAL (SELECT now() - (g * 3590.0 / q.n) * interval '1 second'
                              * (1 + 0.5 * sin(g / 40.0)) / 1.5 AS at) AS t",
    )
    .execute(&mut *tx)
    .await
    .unwrap();
    sqlx::raw_sql("ALTER TABLE pgq.jobs ENABLE TRIGGER jobs_guard_insert")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
}

#[tokio::test]
async fn every_page_loads_and_is_saved_as_a_screenshot() {
    let db = TestDatabase::new().await;
    let client = db.client();
    add_history(db.pool()).await;
    let gate = Arc::new(Gate::default());
    let handle = worker(&client, &["mail", "media", "pings"], gate.clone());
    let failed = client
        .enqueue(Deliver {
            to: "ada@example.com".into(),
        })
        .await
        .unwrap()
        .id();
    let running = client.enqueue(Resize { image: 7 }).await.unwrap().id();
    for n in 0..3 {
        client.enqueue(Ping { n }).await.unwrap();
    }
    wait_for_status(&client, failed, JobStatus::Failed).await;
    eventually("the resize reports its stage", || async {
        let job = client.job(running).await.unwrap().unwrap();
        job.current_stage.as_deref() == Some("resizing")
    })
    .await;
    client.pause_queue("billing").await.unwrap();
    for n in 0..4 {
        let later = EnqueueOptions::default()
            .queue("billing")
            .delay(Duration::from_secs(60 * (n + 1)));
        client
            .enqueue_with(Ping { n: 10 + n as u32 }, later)
            .await
            .unwrap();
    }
    let overdue = EnqueueOptions::default()
        .queue("billing")
        .run_at(chrono::Utc::now() - chrono::Duration::minutes(7));
    client.enqueue_with(Ping { n: 99 }, overdue).await.unwrap();

    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    browser.goto(&served.url).await;
    assert_eq!(browser.text("h1").await, "Queues");
    let rows = browser.all("table.queues tbody tr").await;
    let mut names = Vec::new();
    for row in rows {
        names.push(row.attr("data-queue").await.unwrap().unwrap());
    }
    assert_eq!(names, ["billing", "mail", "media", "pings"]);
    let billing = browser.text("tr[data-queue=billing]").await;
    assert!(billing.contains("paused"), "{billing}");
    assert!(browser.all("svg.chart rect.completed").await.len() > 20);
    browser.screenshot("queues").await;

    browser.click("header.top nav a[href='/jobs']").await;
    assert_eq!(browser.text("h1").await, "Jobs");
    let first = browser.text("table.jobs tbody tr").await;
    assert!(first.contains("Ping"), "the newest job first: {first}");
    browser.screenshot("jobs").await;

    browser.goto(&format!("{}/jobs/{failed}", served.url)).await;
    assert_eq!(browser.text("#job-status").await, "failed");
    assert!(
        browser
            .text("#payload")
            .await
            .contains("\"to\": \"ada@example.com\"")
    );
    assert!(browser.text("table.errors").await.contains(DELIVERY_ERROR));
    browser.screenshot("job").await;

    browser.click("header.top nav a[href='/workers']").await;
    assert_eq!(browser.text("h1").await, "Workers");
    let worker = browser.text("section.worker").await;
    assert!(
        worker.contains("Resize") && worker.contains("resizing"),
        "{worker}"
    );
    browser.screenshot("workers").await;

    // No worker here declares a schedule: the page says how to declare one.
    browser.click("header.top nav a[href='/schedules']").await;
    assert_eq!(browser.text("h1").await, "Schedules");
    let empty = browser.text(".empty").await;
    assert!(
        empty.contains("#[task(cron = ") && empty.contains("WorkerBuilder::periodic"),
        "{empty}"
    );
    assert!(browser.all("table.schedules").await.is_empty());
    browser.screenshot("schedules-empty").await;

    browser.close().await;
    gate.0.notify_one();
    handle.shutdown().await.unwrap();
}
