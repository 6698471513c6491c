//! What the dashboard refuses or keeps back: an action without its CSRF token, any action when
//! read-only, and payload values it is configured to mask or hide.

use std::sync::Arc;

use pgq_core::{JobStatus, Task};
use pgq_testkit::TestDatabase;
use pgq_web::{DashboardConfig, PayloadView};
use serde::{Deserialize, Serialize};

use crate::browser::Browser;
use crate::support::{Deliver, Gate, paused_queues, serve, status, wait_for_status, worker};

/// A task whose unique key is made from its payload.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "mail", unique_key = "welcome:{to}")]
struct Welcome {
    to: String,
}

/// A failed job to act on, and the client.
async fn failed_job(db: &TestDatabase) -> pgq_core::JobId {
    let client = db.client();
    let handle = worker(&client, &["mail"], Arc::new(Gate::default()));
    let id = client
        .enqueue(Deliver {
            to: "linus@example.com".into(),
        })
        .await
        .unwrap()
        .id();
    wait_for_status(&client, id, JobStatus::Failed).await;
    handle.shutdown().await.unwrap();
    id
}

#[tokio::test]
async fn an_action_without_the_csrf_token_is_refused() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = failed_job(&db).await;
    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    browser.goto(&format!("{}/jobs/{id}", served.url)).await;
    browser
        .run("document.querySelector('form.job-actions input[name=csrf]').remove(); return true;")
        .await;
    browser.click("form.job-actions button[value=retry]").await;
    browser.wait_for_text("h1", "Forbidden").await;
    let notice = browser.text("p.notice").await;
    assert!(notice.contains("CSRF token"), "{notice}");
    assert_eq!(status(&client, id).await, JobStatus::Failed);

    // A forged token fares no better.
    browser.goto(&format!("{}/jobs/{id}", served.url)).await;
    browser
        .run("document.querySelector('form.job-actions input[name=csrf]').value = '00'.repeat(32); return true;")
        .await;
    browser.click("form.job-actions button[value=retry]").await;
    browser.wait_for_text("h1", "Forbidden").await;
    assert_eq!(status(&client, id).await, JobStatus::Failed);

    browser.close().await;
}

#[tokio::test]
async fn a_read_only_dashboard_shows_no_actions_and_refuses_them() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = failed_job(&db).await;
    let served = serve(client.clone(), DashboardConfig::new().read_only(true), "").await;
    let browser = Browser::start().await;

    browser.goto(&format!("{}/jobs/{id}", served.url)).await;
    assert_eq!(browser.text("header.top .readonly").await, "read-only");
    assert!(browser.all("form.job-actions").await.is_empty());
    browser.goto(&served.url).await;
    assert!(browser.all("td.actions").await.is_empty());
    browser.goto(&format!("{}/jobs", served.url)).await;
    assert!(browser.all(".bulk-bar").await.is_empty());

    // Posted by hand, with the page's own token, it is still refused.
    let answer = browser
        .run_async(&format!(
            "const done = arguments[arguments.length - 1];
             const token = document.querySelector('input[name=csrf]').value;
             const body = new URLSearchParams({{csrf: token, id: '{id}', action: 'retry'}});
             fetch('/jobs/action', {{method: 'POST', body}}).then(r => done(r.status));"
        ))
        .await;
    assert_eq!(answer, 403);
    assert_eq!(status(&client, id).await, JobStatus::Failed);

    // Whatever else the request holds: a body it cannot read, an address that is not UTF-8.
    for (path, content_type) in [
        ("/jobs/action", "application/json"),
        ("/queues/pause", "text/plain"),
        ("/queues/%FF", "application/x-www-form-urlencoded"),
    ] {
        let answer = browser
            .run_async(&format!(
                "const done = arguments[arguments.length - 1];
                 fetch({path:?}, {{method: 'POST', headers: {{'content-type': {content_type:?}}},
                                   body: 'queue=mail'}}).then(r => done(r.status));"
            ))
            .await;
        assert_eq!(answer, 403, "{path}");
    }
    assert!(paused_queues(&client).await.is_empty());

    browser.close().await;
}

#[tokio::test]
async fn masked_and_hidden_payloads_keep_their_values_off_the_page() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client
        .enqueue(Deliver {
            to: "secret@example.com".into(),
        })
        .await
        .unwrap()
        .id();
    // Its unique key holds the same value.
    let keyed = client
        .enqueue(Welcome {
            to: "secret@example.com".into(),
        })
        .await
        .unwrap()
        .id();
    let masked = DashboardConfig::new().payloads(PayloadView::Masked(vec!["to".into()]));
    let masked = serve(client.clone(), masked, "").await;
    let hidden = DashboardConfig::new().payloads(PayloadView::Hidden);
    let hidden = serve(client.clone(), hidden, "").await;
    let browser = Browser::start().await;

    browser.goto(&format!("{}/jobs/{id}", masked.url)).await;
    let payload = browser.text("#payload").await;
    assert!(payload.contains("\"to\": \"•••\""), "{payload}");
    assert!(!browser.page_text().await.contains("secret@example.com"));

    browser.goto(&format!("{}/jobs/{id}", hidden.url)).await;
    assert!(browser.text("#payload").await.contains("hidden"));
    let source = browser.client.source().await.unwrap();
    assert!(!source.contains("secret@example.com"));

    for url in [&masked.url, &hidden.url] {
        browser.goto(&format!("{url}/jobs/{keyed}")).await;
        let source = browser.client.source().await.unwrap();
        assert!(!source.contains("secret@"), "{url}: {source}");
        assert!(
            browser
                .page_text()
                .await
                .contains("hidden with the payload")
        );
    }

    browser.close().await;
}
