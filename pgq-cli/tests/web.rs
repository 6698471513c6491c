//! `pgq web`: serves the dashboard with its access token, and refuses to serve beyond this host
//! without one.

use std::process::Stdio;
use std::time::Duration;

use pgq_testkit::TestDatabase;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::Command;

const LIMIT: Duration = Duration::from_secs(30);

/// One HTTP/1.1 GET of `path` from `addr`; the status code and the body.
async fn get(addr: &str, path: &str, bearer: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let auth = bearer
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    (status, response)
}

#[tokio::test]
async fn pgq_web_serves_the_dashboard_to_holders_of_its_token() {
    let db = TestDatabase::new().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_pgq"))
        .args(["web", "--bind", "127.0.0.1:0", "--read-only"])
        .env("DATABASE_URL", db.url())
        .env("PGQ_WEB_TOKEN", "let-me-in")
        .env_remove("PGQ_SCHEMA")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(LIMIT, lines.next_line())
        .await
        .expect("pgq web says where it listens")
        .unwrap()
        .unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    assert!(line.contains("read-only"), "{line}");

    let (status, page) = get(&addr, "/", Some("let-me-in")).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("<h1>Queues</h1>"), "{page}");
    assert!(page.contains("read-only"), "{page}");
    let (status, page) = get(&addr, "/jobs", None).await;
    assert_eq!(status, 401);
    assert!(page.contains("Sign in"), "{page}");
}

#[tokio::test]
async fn pgq_web_refuses_a_public_address_without_a_token() {
    let db = TestDatabase::new().await;
    let output = Command::new(env!("CARGO_BIN_EXE_pgq"))
        .args(["web", "--bind", "0.0.0.0:0"])
        .env("DATABASE_URL", db.url())
        .env_remove("PGQ_WEB_TOKEN")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("refusing to serve 0.0.0.0:0 without an access token"),
        "{stderr}"
    );
}
