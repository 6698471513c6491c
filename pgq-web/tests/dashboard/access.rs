//! The access token the standalone dashboard takes, and a dashboard nested under a prefix.

use chrono::Utc;
use pgq_core::Schedule;
use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;

use crate::browser::Browser;
use crate::support::{Ping, paused_queues, serve};

const TOKEN: &str = "correct-horse-battery-staple";

#[tokio::test]
async fn the_access_token_is_asked_for_once_and_kept_in_an_http_only_cookie() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let served = serve(
        client.clone(),
        DashboardConfig::new().access_token(TOKEN),
        "",
    )
    .await;
    let browser = Browser::start().await;

    browser.goto(&format!("{}/jobs", served.url)).await;
    assert_eq!(browser.text("h1").await, "Sign in");
    browser.screenshot("login").await;
    assert!(browser.all("table.jobs, form.filters").await.is_empty());

    browser
        .find("#token")
        .await
        .send_keys("wrong")
        .await
        .unwrap();
    browser.click("section.login button").await;
    browser
        .wait_for_text("p.notice", "not the access token")
        .await;

    browser.find("#token").await.send_keys(TOKEN).await.unwrap();
    browser.click("section.login button").await;
    browser.wait_for_text("h1", "Queues").await;
    browser.goto(&format!("{}/jobs", served.url)).await;
    assert_eq!(browser.text("h1").await, "Jobs");
    let cookies = browser.run("return document.cookie;").await;
    assert_eq!(cookies, "", "no script reads the session: {cookies}");

    // Scripts and other tools may send the token as a bearer header instead.
    let statuses = browser
        .run_async(&format!(
            "const done = arguments[arguments.length - 1];
             Promise.all([
               fetch('/workers', {{credentials: 'omit', headers: {{Authorization: 'Bearer {TOKEN}'}}}}),
               fetch('/workers', {{credentials: 'omit', headers: {{Authorization: 'Bearer nope'}}}}),
               fetch('/workers', {{credentials: 'omit'}}),
             ]).then(rs => done(rs.map(r => r.status)));"
        ))
        .await;
    assert_eq!(statuses, serde_json::json!([200, 401, 401]));

    browser.close().await;
}

#[tokio::test]
async fn nested_under_a_prefix_every_link_stays_under_it() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Ping { n: 1 }).await.unwrap().id();
    let served = serve(client.clone(), DashboardConfig::new(), "/admin/jobs").await;
    let browser = Browser::start().await;

    browser.goto(&served.url).await;
    assert_eq!(browser.text("h1").await, "Queues");
    browser.click("a.queue-name").await;
    browser.wait_for_text("h1", "Jobs").await;
    browser.click(&format!("tr[data-job='{id}'] a")).await;
    browser.wait_for_text("h1", &format!("Job {id}")).await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), format!("/admin/jobs/jobs/{id}"));
    browser.click("header.top nav a:nth-child(3)").await;
    browser.wait_for_text("h1", "Workers").await;
    // Styled: the stylesheet came from under the prefix too.
    let background = browser
        .run("return getComputedStyle(document.querySelector('header.top')).backgroundColor;")
        .await;
    assert_eq!(background, "rgb(22, 27, 38)");

    // The schedules page, and its task link, stay under the prefix too.
    let schedule = Schedule::cron("0 0 * * * *").name("hourly-ping");
    pgq_core::__testkit::enqueue_due(&client, schedule, || Ping { n: 2 }, Utc::now())
        .await
        .unwrap();
    browser.click("header.top nav a:nth-child(4)").await;
    browser.wait_for_text("h1", "Schedules").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/admin/jobs/schedules");
    browser
        .click("tr[data-schedule='hourly-ping'] td.task a")
        .await;
    browser.wait_for_text("h1", "Jobs").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/admin/jobs/jobs");
    assert_eq!(url.query(), Some("task=Ping"));
    browser.find(&format!("tr[data-job='{id}']")).await;

    // An address under the prefix that the dashboard does not have gets its page, which names
    // the whole address and links back under the prefix.
    browser.goto(&format!("{}/nowhere", served.url)).await;
    assert_eq!(browser.text("h1").await, "Not Found");
    let notice = browser.text("p.notice").await;
    assert!(
        notice.contains("no page at /admin/jobs/nowhere"),
        "{notice}"
    );
    browser.click("main a").await;
    browser.wait_for_text("h1", "Queues").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/admin/jobs");
    // So do the brand and the navigation's link to the queues.
    for link in ["a.brand", "header.top nav a:nth-child(1)"] {
        browser.goto(&format!("{}/workers", served.url)).await;
        browser.click(link).await;
        browser.wait_for_text("h1", "Queues").await;
        let url = browser.client.current_url().await.unwrap();
        assert_eq!(url.path(), "/admin/jobs", "{link}");
    }

    // An action posts under the prefix, with the cookie scoped to it, and leads back there.
    browser
        .click("tr[data-queue=pings] button[value=pause]")
        .await;
    let report = browser.text("#report").await;
    assert!(report.contains("Paused queue pings."), "{report}");
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/admin/jobs/queues/pause");
    browser.click("#back").await;
    browser.wait_for_text("h1", "Queues").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/admin/jobs");
    assert_eq!(paused_queues(&client).await, ["pings"]);

    browser.close().await;
}

#[tokio::test]
async fn nested_with_an_access_token_the_login_leads_to_the_queues_under_the_prefix() {
    let db = TestDatabase::new().await;
    let served = serve(
        db.client(),
        DashboardConfig::new().access_token(TOKEN),
        "/admin/jobs",
    )
    .await;
    let browser = Browser::start().await;

    browser.goto(&format!("{}/workers", served.url)).await;
    assert_eq!(browser.text("h1").await, "Sign in");
    browser.find("#token").await.send_keys(TOKEN).await.unwrap();
    browser.click("section.login button").await;
    browser.wait_for_text("h1", "Queues").await;
    let url = browser.client.current_url().await.unwrap();
    assert_eq!(url.path(), "/admin/jobs");
    // The session cookie, scoped to the prefix, opens every page under it.
    browser.goto(&format!("{}/workers", served.url)).await;
    assert_eq!(browser.text("h1").await, "Workers");

    browser.close().await;
}

/// Sends `request` as it is over a new connection and returns the status line and headers.
async fn raw(url: &str, request: String) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    answer
        .split("\r\n\r\n")
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// Over HTTP/2 the host travels in the request's authority and no `Host` header comes: a
/// request whose target names its host (an absolute URI) and that has no `Host` is the same
/// request over HTTP/1.1. Its `Origin` is compared with that host, not refused for want of one.
#[tokio::test]
async fn a_request_naming_its_host_only_in_its_target_signs_in() {
    let db = TestDatabase::new().await;
    let served = serve(db.client(), DashboardConfig::new().access_token(TOKEN), "").await;
    let body = format!("token={TOKEN}");
    let sign_in = |origin: &str| {
        format!(
            "POST {url}/login HTTP/1.1\r\norigin: {origin}\r\n\
             content-type: application/x-www-form-urlencoded\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len(),
            url = served.url,
        )
    };
    let head = raw(&served.url, sign_in(&served.url)).await;
    assert!(head.starts_with("HTTP/1.1 303"), "{head}");
    assert!(head.contains("pgq_session="), "{head}");
    let head = raw(&served.url, sign_in("http://evil.example")).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
}

/// A token configured empty lets no one in: an empty field or bearer header is never it.
#[tokio::test]
async fn an_empty_access_token_lets_no_one_in() {
    let db = TestDatabase::new().await;
    let served = serve(db.client(), DashboardConfig::new().access_token(""), "").await;
    let browser = Browser::start().await;
    browser.goto(&format!("{}/login", served.url)).await;
    let statuses = browser
        .run_async(
            "const done = arguments[arguments.length - 1];
             const body = new URLSearchParams({token: ''});
             Promise.all([
               fetch('/login', {method: 'POST', body, redirect: 'manual'}),
               fetch('/login', {method: 'POST', body: new URLSearchParams(), redirect: 'manual'}),
               fetch('/workers', {credentials: 'omit', headers: {Authorization: 'Bearer '}}),
               fetch('/workers'),
             ]).then(rs => done(rs.map(r => r.status)));",
        )
        .await;
    assert_eq!(statuses, serde_json::json!([401, 401, 401, 401]));
    browser.close().await;
}
