//! Hostile values from the database render as text: a payload, an error, a tag and a schedule's
//! name holding markup never run in the page; a hostile queue name in a form is refused.

use chrono::Utc;
use pgq_core::{JobStatus, Schedule};
use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;
use serde_json::json;

use crate::browser::Browser;
use crate::support::{Deliver, Ping, paused_queues, serve};

const SCRIPT: &str = "<script>window.pwned = 1</script>";
const IMG: &str = "<img src=x onerror=\"window.pwned = 2\">";

#[tokio::test]
async fn hostile_payloads_errors_and_names_render_as_text() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client
        .enqueue(Deliver {
            to: format!("{SCRIPT}{IMG}"),
        })
        .await
        .unwrap()
        .id();
    // A failed attempt whose error and task name hold markup, as a hand-written row could.
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'w',
             claimed_at = now(), started_at = now(), lease_expires_at = now() WHERE id = $1",
    )
    .bind(id.get())
    .execute(db.pool())
    .await
    .unwrap();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'failed', phase = 2, completed_at = now(),
             last_error = $2, errors = pgq.append_error(errors, 1, $2, 10),
             meta = $3
         WHERE id = $1",
    )
    .bind(id.get())
    .bind(format!("{IMG} {SCRIPT}"))
    .bind(json!({"tags": {"note": SCRIPT}}))
    .execute(db.pool())
    .await
    .unwrap();
    assert_eq!(
        client.job(id).await.unwrap().unwrap().status,
        JobStatus::Failed
    );
    // A schedule whose name holds markup, registered as a leader's first step would.
    let hostile = Schedule::cron("0 0 * * * *").name(format!("{SCRIPT}{IMG}"));
    let make = || Deliver {
        to: "ops@example.com".into(),
    };
    pgq_core::__testkit::enqueue_due(&client, hostile, make, Utc::now())
        .await
        .unwrap();
    assert_eq!(client.schedules().await.unwrap().len(), 1);
    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    for page in [
        "/schedules".to_owned(),
        format!("/jobs/{id}"),
        "/jobs".to_owned(),
    ] {
        browser.goto(&format!("{}{page}", served.url)).await;
        let text = browser.page_text().await;
        assert!(text.contains(SCRIPT), "{page} shows the markup as text");
        assert!(text.contains("onerror="), "{page} shows the markup as text");
        assert_eq!(
            browser.run("return window.pwned === undefined;").await,
            true,
            "nothing ran on {page}"
        );
        assert_eq!(
            browser.all("img").await.len(),
            0,
            "no element was made on {page}"
        );
        assert_eq!(
            browser.all("script").await.len(),
            1,
            "only the dashboard's own script on {page}"
        );
    }
    browser.screenshot("hostile").await;

    // A queue name outside the rules, posted with a valid token, is refused with its reason.
    browser.goto(&served.url).await;
    let answer = browser
        .run_async(
            "const done = arguments[arguments.length - 1];
             fetch('/jobs', {credentials: 'same-origin'})
               .then(r => r.text())
               .then(html => {
                 const token = new DOMParser().parseFromString(html, 'text/html')
                   .querySelector('input[name=csrf]').value;
                 const body = new URLSearchParams({csrf: token, queue: '<script>x</script>'});
                 return fetch('/queues/pause', {method: 'POST', body});
               })
               .then(r => r.text().then(t => done([r.status, t])));",
        )
        .await;
    assert_eq!(answer[0], 400);
    let page = answer[1].as_str().unwrap();
    assert!(page.contains("&lt;script&gt;x&lt;/script&gt;"), "{page}");
    assert!(!page.contains("<script>x"), "{page}");
    assert!(paused_queues(&client).await.is_empty());

    browser.close().await;
}

#[tokio::test]
async fn a_job_id_that_is_not_a_number_gets_the_dashboards_own_page() {
    let db = TestDatabase::new().await;
    let served = serve(db.client(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    for (path, shown) in [
        ("/jobs/abc", "\"abc\" is not a job id"),
        (
            "/jobs/99999999999999999999",
            "\"99999999999999999999\" is not a job id",
        ),
        (
            "/jobs/%3Cscript%3Ex%3C%2Fscript%3E",
            "\"<script>x</script>\" is not a job id",
        ),
    ] {
        own_page(&browser, &served.url, path, 400, shown).await;
    }
    browser.close().await;
}

/// Opens `path` and checks that it is the dashboard's own page for `status`: in the shell, with
/// only the dashboard's script, showing `shown` as text.
async fn own_page(browser: &Browser, url: &str, path: &str, status: u16, shown: &str) {
    browser.goto(&format!("{url}{path}")).await;
    let text = browser.page_text().await;
    assert!(text.contains(shown), "{path}: {text}");
    assert!(
        !browser.all("nav a").await.is_empty(),
        "{path} is shown in the dashboard's shell"
    );
    assert_eq!(browser.all("script").await.len(), 1, "{path}");
    let answered = browser
        .run_async(&format!(
            "const done = arguments[arguments.length - 1];
             fetch('{path}').then(r => done(r.status));"
        ))
        .await;
    assert_eq!(answered, status, "{path}");
}

#[tokio::test]
async fn addresses_methods_and_bodies_it_cannot_serve_get_the_dashboards_own_pages() {
    let db = TestDatabase::new().await;
    db.client().enqueue(Ping { n: 1 }).await.unwrap();
    let served = serve(db.client(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;

    // An address it does not have, shown in the shell and escaped.
    for (path, shown) in [
        ("/nowhere", "no page at /nowhere"),
        ("/jobs/1/2/3", "no page at /jobs/1/2/3"),
        ("/%3Cscript%3E", "no page at /%3Cscript%3E"),
    ] {
        own_page(&browser, &served.url, path, 404, shown).await;
    }

    // Each request: method, path, content type, body; the status and text it gets. A body over
    // the router's 2 MiB limit is refused before it is read.
    let cases = [
        ("GET", "/nowhere", "", "", 404, "no page at /nowhere"),
        (
            "GET",
            "/jobs/action",
            "",
            "",
            405,
            "/jobs/action does not answer GET",
        ),
        (
            "DELETE",
            "/jobs/1",
            "",
            "",
            405,
            "/jobs/1 does not answer DELETE",
        ),
        (
            "GET",
            "/jobs/abc/live",
            "",
            "",
            400,
            "&quot;abc&quot; is not a job id",
        ),
        ("GET", "/jobs/%FF", "", "", 400, "UTF-8"),
        ("GET", "/jobs/%FF/live", "", "", 400, "UTF-8"),
        (
            "POST",
            "/queues/%FF",
            "application/x-www-form-urlencoded",
            "queue=mail",
            400,
            "UTF-8",
        ),
        (
            "GET",
            "/jobs/0",
            "",
            "",
            400,
            "&quot;0&quot; is not a job id",
        ),
        // PostgreSQL's text holds no NUL: refused before the database, with a job in the table
        // that a search would otherwise reach.
        ("GET", "/jobs?task=%00", "", "", 400, "NUL"),
        ("GET", "/jobs?error=a%00b", "", "", 400, "NUL"),
        (
            "POST",
            "/jobs/action",
            "text/plain",
            "id=1",
            415,
            "application/x-www-form-urlencoded",
        ),
        (
            "POST",
            "/queues/pause",
            "application/json",
            "{}",
            415,
            "application/x-www-form-urlencoded",
        ),
        (
            "POST",
            "/login",
            "text/plain",
            "token=x",
            415,
            "application/x-www-form-urlencoded",
        ),
        // A form a lenient reader would go on with, broken parts replaced.
        (
            "POST",
            "/login",
            "application/x-www-form-urlencoded",
            "token=%FF",
            400,
            "malformed form",
        ),
        (
            "POST",
            "/jobs/action",
            "application/x-www-form-urlencoded",
            "action=retry&id=1&csrf=%",
            400,
            "malformed form",
        ),
        (
            "POST",
            "/queues/pause",
            "application/x-www-form-urlencoded",
            "queue=m\u{e9}il",
            400,
            "malformed form",
        ),
        (
            "POST",
            "/jobs/action",
            "application/x-www-form-urlencoded",
            "LARGE",
            413,
            "Failed to buffer the request body",
        ),
    ];
    browser.goto(&served.url).await;
    for (method, path, content_type, body, status, shown) in cases {
        let answer = browser
            .run_async(&format!(
                "const done = arguments[arguments.length - 1];
                 const body = {body:?} === 'LARGE' ? 'a='.padEnd(3 << 20, 'a') : {body:?};
                 const init = {{method: {method:?}}};
                 if ({content_type:?}) {{
                     init.headers = {{'content-type': {content_type:?}}};
                     init.body = body;
                 }}
                 fetch({path:?}, init).then(r => r.text().then(t =>
                     done([r.status, t, r.headers.get('allow') || ''])));",
            ))
            .await;
        let what = format!("{method} {path}");
        assert_eq!(answer[0], status, "{what}: {answer:?}");
        let page = answer[1].as_str().unwrap();
        assert!(page.contains(shown), "{what}: {page}");
        assert!(
            page.contains("<nav"),
            "{what} is shown in the dashboard's shell"
        );
        if status == 405 {
            assert!(
                !answer[2].as_str().unwrap().is_empty(),
                "{what} says what it allows"
            );
        }
    }

    // What a request held is repeated cut to 80 characters, however long it was.
    let long = "a".repeat(5_000);
    for path in [
        format!("/jobs?order={long}"),
        format!("/jobs?limit={long}"),
        format!("/jobs/{long}"),
        // Refused by the filter's own checks, and shown again in its form.
        format!("/jobs?queue={long}"),
        format!("/jobs?task={long}"),
        format!("/jobs?error={long}"),
    ] {
        let page = browser
            .run_async(&format!(
                "const done = arguments[arguments.length - 1];
                 fetch({path:?}).then(r => r.text().then(done));"
            ))
            .await;
        let page = page.as_str().unwrap();
        assert!(page.contains(&"a".repeat(80)), "{page}");
        assert!(!page.contains(&"a".repeat(81)), "{page}");
    }
    browser.close().await;
}
