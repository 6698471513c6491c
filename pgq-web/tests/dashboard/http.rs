//! What the dashboard answers at the HTTP level, without a browser: statuses, headers, and when
//! it reads a body.

use std::time::Duration;

use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::{Resize, serve};

/// Sends `request` (its head, maybe part of a body) and reads the answer's head: its status line
/// and headers, lower-cased. Fails if none comes within five seconds.
async fn answer_head(url: &str, request: &str) -> String {
    let address = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let read = async {
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0];
            stream.read_exact(&mut byte).await.unwrap();
            head.push(byte[0]);
        }
        String::from_utf8_lossy(&head).to_lowercase()
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .expect("an answer within five seconds")
}

fn get(path: &str, url: &str, extra: &str) -> String {
    let host = url.trim_start_matches("http://");
    format!("GET {path} HTTP/1.1\r\nhost: {host}\r\n{extra}connection: close\r\n\r\n")
}

#[tokio::test]
async fn a_missing_jobs_live_stream_is_a_404_like_its_page() {
    let db = TestDatabase::new().await;
    let served = serve(db.client(), DashboardConfig::new(), "").await;
    for path in ["/jobs/999999", "/jobs/999999/live"] {
        let head = answer_head(&served.url, &get(path, &served.url, "")).await;
        assert!(head.starts_with("http/1.1 404"), "{path}: {head}");
    }
    let id = db.client().enqueue(Resize { image: 1 }).await.unwrap().id();
    let head = answer_head(
        &served.url,
        &get(&format!("/jobs/{id}/live"), &served.url, ""),
    )
    .await;
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
}

/// `loopback_only`: a request naming another host (DNS rebinding) gets a 421 page of the
/// dashboard's own, with its security headers; loopback names are answered.
#[tokio::test]
async fn loopback_only_answers_loopback_names_and_refuses_others_with_a_page() {
    let db = TestDatabase::new().await;
    let served = serve(db.client(), DashboardConfig::new().loopback_only(true), "").await;
    let port = served.url.rsplit(':').next().unwrap().to_owned();
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let request = format!("GET / HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
        let head = answer_head(&served.url, &request).await;
        assert!(head.starts_with("http/1.1 200"), "{host}: {head}");
    }
    for path in ["/", "/assets/dashboard.css", "/login"] {
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: rebound.example:{port}\r\nconnection: close\r\n\r\n"
        );
        let head = answer_head(&served.url, &request).await;
        assert!(head.starts_with("http/1.1 421"), "{path}: {head}");
        assert!(head.contains("content-type: text/html"), "{path}: {head}");
        assert!(head.contains("x-frame-options: deny"), "{path}: {head}");
        assert!(head.contains("cache-control: no-store"), "{path}: {head}");
    }
    // Off by default: an application mounting the router answers its own names.
    let open = serve(db.client(), DashboardConfig::new(), "").await;
    let request = "GET / HTTP/1.1\r\nhost: jobs.internal\r\nconnection: close\r\n\r\n";
    assert!(
        answer_head(&open.url, request)
            .await
            .starts_with("http/1.1 200")
    );
}

#[tokio::test]
async fn every_answer_carries_the_security_headers() {
    let db = TestDatabase::new().await;
    let id = db.client().enqueue(Resize { image: 1 }).await.unwrap().id();
    let served = serve(db.client(), DashboardConfig::new(), "").await;
    for path in [
        "/".to_owned(),
        "/assets/dashboard.js".to_owned(),
        "/assets/dashboard.css".to_owned(),
        format!("/jobs/{id}/live"),
        "/nowhere".to_owned(),
    ] {
        let head = answer_head(&served.url, &get(&path, &served.url, "")).await;
        assert!(
            head.contains("x-content-type-options: nosniff"),
            "{path}: {head}"
        );
        assert!(
            head.contains("referrer-policy: same-origin"),
            "{path}: {head}"
        );
        // Everything but the assets is never stored, the live stream too.
        let as_documented = if path.starts_with("/assets/") {
            head.contains("cache-control:") && !head.contains("cache-control: no-store")
        } else {
            head.contains("cache-control: no-store")
        };
        assert!(as_documented, "{path}: {head}");
    }
}

#[tokio::test]
async fn a_read_only_dashboard_refuses_an_action_before_its_body_arrives() {
    let db = TestDatabase::new().await;
    let served = serve(db.client(), DashboardConfig::new().read_only(true), "").await;
    let host = served.url.trim_start_matches("http://").to_owned();
    for path in ["/jobs/action", "/queues/pause"] {
        // The body announced never comes: the answer must not wait for it.
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: {host}\r\n\
             content-type: application/x-www-form-urlencoded\r\ncontent-length: 100000\r\n\r\n"
        );
        let head = answer_head(&served.url, &request).await;
        assert!(head.starts_with("http/1.1 403"), "{path}: {head}");
    }
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_and_the_token_never_printed() {
    const TOKEN: &str = "s3cret-token";
    let db = TestDatabase::new().await;
    let config = DashboardConfig::new().access_token(TOKEN);
    assert!(!format!("{config:?}").contains(TOKEN));
    let served = serve(db.client(), config, "").await;
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let auth = format!("authorization: {scheme} {TOKEN}\r\n");
        let head = answer_head(&served.url, &get("/", &served.url, &auth)).await;
        assert!(head.starts_with("http/1.1 200"), "{scheme}: {head}");
    }
    let auth = "authorization: Bearer wrong\r\n";
    let head = answer_head(&served.url, &get("/", &served.url, auth)).await;
    assert!(!head.starts_with("http/1.1 200"), "{head}");
}
