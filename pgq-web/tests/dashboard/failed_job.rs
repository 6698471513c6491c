//! An operator opens a failed job, reads why it failed, retries it, and sees it run.

use std::sync::Arc;

use pgq_core::JobStatus;
use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;

use crate::browser::Browser;
use crate::support::{DELIVERY_ERROR, Deliver, Gate, serve, status, wait_for_status, worker};

#[tokio::test]
async fn a_failed_job_shows_its_error_and_runs_again_after_retry() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let handle = worker(&client, &["mail"], Arc::new(Gate::default()));
    let id = client
        .enqueue(Deliver {
            to: "grace@example.com".into(),
        })
        .await
        .unwrap()
        .id();
    wait_for_status(&client, id, JobStatus::Failed).await;
    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    // Found through the list's status filter, as an operator would.
    browser.goto(&format!("{}/jobs", served.url)).await;
    browser.click("input[name=status][value=failed]").await;
    browser.click("form.filters button[type=submit]").await;
    browser.wait_for_text("p.count", "1 job matches").await;
    browser.click(&format!("tr[data-job='{id}'] a")).await;

    assert_eq!(browser.text("#job-status").await, "failed");
    let errors = browser.text("table.errors tbody").await;
    assert!(errors.contains(DELIVERY_ERROR), "{errors}");
    assert!(errors.starts_with('1'), "attempt 1 failed: {errors}");

    browser.click("form.job-actions button[value=retry]").await;
    let report = browser.text("#report").await;
    assert!(report.contains(&format!("Retried 1 job: {id}")), "{report}");
    browser.screenshot("action-report").await;

    wait_for_status(&client, id, JobStatus::Completed).await;
    browser.click("#back").await;
    browser.wait_for_text("#job-status", "completed").await;
    let details = browser.text("dl.details").await;
    assert!(details.contains("2 of 2"), "two attempts: {details}");
    assert_eq!(status(&client, id).await, JobStatus::Completed);

    browser.close().await;
    handle.shutdown().await.unwrap();
}
