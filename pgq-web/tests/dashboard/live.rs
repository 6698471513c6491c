//! A job's page follows its progress, stage and status live, without a reload.

use std::sync::Arc;

use pgq_core::JobStatus;
use pgq_testkit::TestDatabase;
use pgq_web::DashboardConfig;

use crate::browser::Browser;
use crate::support::{Gate, Resize, serve, wait_for_status, worker};

#[tokio::test]
async fn a_running_job_s_progress_and_stage_update_live() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Resize { image: 3 }).await.unwrap().id();
    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let browser = Browser::start().await;
    browser.goto(&format!("{}/jobs/{id}", served.url)).await;
    assert_eq!(browser.text("#job-status").await, "pending");
    assert_eq!(browser.text("#job-progress-text").await, "0%");
    // Wait for the page's stream to be open, so that no change can slip past it.
    browser.find("#job[data-live]").await;
    // A mark on this page: a reload would clear it.
    browser
        .run("window.pgqMark = 'same page'; return true;")
        .await;

    let gate = Arc::new(Gate::default());
    let handle = worker(&client, &["media"], gate.clone());
    browser.wait_for_text("#job-stage", "resizing").await;
    assert_eq!(browser.text("#job-status").await, "running");
    assert_eq!(browser.text("#job-progress-text").await, "40%");
    assert_eq!(
        browser.run("return window.pgqMark;").await,
        "same page",
        "the update came without a reload"
    );

    gate.0.notify_one();
    wait_for_status(&client, id, JobStatus::Completed).await;
    browser.wait_for_text("#job-status", "completed").await;
    browser.wait_for_text("#job-progress-text", "100%").await;

    browser.close().await;
    handle.shutdown().await.unwrap();
}

/// Sends a GET for `path` and reads until the end of the response's headers; the status code
/// and the connection, left open.
async fn open_stream(addr: &str, path: &str) -> (u16, tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0];
        stream.read_exact(&mut byte).await.unwrap();
        head.push(byte[0]);
    }
    let status = std::str::from_utf8(&head[9..12]).unwrap().parse().unwrap();
    (status, stream)
}

#[tokio::test]
async fn live_streams_share_one_connection_and_are_bounded() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client.enqueue(Resize { image: 1 }).await.unwrap().id();
    let served = serve(client.clone(), DashboardConfig::new(), "").await;
    let addr = served.url.trim_start_matches("http://");
    let path = format!("/jobs/{id}/live");
    let mut open = Vec::new();
    // More streams than the client's pool has connections: they share one listener.
    for _ in 0..64 {
        let (status, stream) = open_stream(addr, &path).await;
        assert_eq!(status, 200);
        open.push(stream);
    }
    let (status, _) = open_stream(addr, &path).await;
    assert_eq!(status, 503, "at most 64 pages follow their jobs live");
    // A job that does not exist is still a 404, as its page.
    let gone = i64::from(id) + 1_000;
    let (status, _) = open_stream(addr, &format!("/jobs/{gone}/live")).await;
    assert_eq!(status, 404);
    // The pages themselves still answer.
    let (status, _) = open_stream(addr, &format!("/jobs/{id}")).await;
    assert_eq!(status, 200);
}
