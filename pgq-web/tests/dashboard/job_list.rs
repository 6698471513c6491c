//! The job list: filtered by the form, paged by its cursor, and acted on in bulk.

use pgq_core::{EnqueueOptions, JobStatus};
use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;

use crate::browser::Browser;
use crate::support::{Ping, serve, status};

#[tokio::test]
async fn the_job_list_filters_by_queue_and_pages_through_the_matches() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut in_b = Vec::new();
    for n in 0..8 {
        let queue = if n % 2 == 0 { "alpha" } else { "beta" };
        let id = client
            .enqueue_with(Ping { n }, EnqueueOptions::default().queue(queue))
            .await
            .unwrap()
            .id();
        if queue == "beta" {
            in_b.push(id);
        }
    }
    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    browser.goto(&format!("{}/jobs", served.url)).await;
    assert_eq!(browser.all("table.jobs tbody tr").await.len(), 8);
    let queue = browser.find("input[name=queue]").await;
    queue.send_keys("beta").await.unwrap();
    browser.click("form.filters button[type=submit]").await;
    browser.wait_for_text("p.count", "4 jobs match").await;
    let mut shown = Vec::new();
    for row in browser.all("table.jobs tbody tr").await {
        shown.push(row.attr("data-job").await.unwrap().unwrap());
    }
    let newest_first: Vec<String> = in_b.iter().rev().map(|id| id.to_string()).collect();
    assert_eq!(shown, newest_first);

    // Two a page: the cursor link leads to the older two, then no further.
    browser
        .goto(&format!("{}/jobs?queue=beta&limit=2", served.url))
        .await;
    assert_eq!(browser.all("table.jobs tbody tr").await.len(), 2);
    browser.click("nav.pager a.next").await;
    browser.wait_for_text("p.count", "from here").await;
    let mut second = Vec::new();
    for row in browser.all("table.jobs tbody tr").await {
        second.push(row.attr("data-job").await.unwrap().unwrap());
    }
    assert_eq!(second, newest_first[2..]);

    // A bad filter is said, not a crash.
    browser
        .goto(&format!("{}/jobs?status=done", served.url))
        .await;
    let notice = browser.text("p.notice.bad").await;
    assert!(notice.contains("unknown job status \"done\""), "{notice}");

    browser.close().await;
}

#[tokio::test]
async fn bulk_selection_cancels_every_ticked_job_and_says_so() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(client.enqueue(Ping { n }).await.unwrap().id());
    }
    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    browser.goto(&format!("{}/jobs", served.url)).await;
    let cancel = browser.find(".bulk-bar button[value=cancel]").await;
    assert_eq!(
        cancel.prop("disabled").await.unwrap().as_deref(),
        Some("true"),
        "nothing ticked, nothing to do"
    );
    browser.click("#select-all").await;
    browser.wait_for_text("#selected-count", "3 selected").await;
    browser.click(".bulk-bar button[value=cancel]").await;
    let report = browser.text("#report").await;
    let listed = format!("Cancelled 3 jobs: {}, {}, {}.", ids[0], ids[1], ids[2]);
    assert!(report.contains(&listed), "{report}");
    for id in ids {
        assert_eq!(status(&client, id).await, JobStatus::Cancelled);
    }

    browser.close().await;
}
