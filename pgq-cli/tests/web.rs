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
    get_as(addr, addr, path, bearer).await
}

/// [`get`] with `host` as the request's `Host`.
async fn get_as(addr: &str, host: &str, path: &str, bearer: Option<&str>) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let auth = bearer
        .map(|token| format!("Authorization: Bearer {token}\r\n"))
        .unwrap_or_default();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let status = response[9..12].parse().unwrap();
    (status, response)
}

/// Starts `pgq web` on a free loopback port with `token` (none: without one); the child and the
/// address it listens on.
async fn start(db: &TestDatabase, token: Option<&str>) -> (tokio::process::Child, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pgq"));
    command
        .args(["web", "--bind", "127.0.0.1:0", "--read-only"])
        .env("DATABASE_URL", db.url())
        .env_remove("PGQ_SCHEMA")
        .env_remove("PGQ_WEB_TOKEN")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(token) = token {
        command.env("PGQ_WEB_TOKEN", token);
    }
    let mut child = command.spawn().unwrap();
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
    (child, addr)
}

#[tokio::test]
async fn pgq_web_serves_the_dashboard_to_holders_of_its_token() {
    let db = TestDatabase::new().await;
    let (_child, addr) = start(&db, Some("let-me-in")).await;

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

/// Without a token, a page of another site that gets its name to resolve to this host (DNS
/// rebinding) is not answered: only requests addressed to a loopback name are.
#[tokio::test]
async fn pgq_web_without_a_token_answers_only_requests_addressed_to_this_host() {
    let db = TestDatabase::new().await;
    let (_child, addr) = start(&db, None).await;
    let port = addr.rsplit(':').next().unwrap();
    for host in [addr.clone(), format!("localhost:{port}")] {
        let (status, page) = get_as(&addr, &host, "/", None).await;
        assert_eq!(status, 200, "{host}: {page}");
    }
    let (status, page) = get_as(&addr, &format!("rebound.example:{port}"), "/", None).await;
    assert_eq!(status, 421, "{page}");
    assert!(page.contains("--token"), "{page}");
    // A page of the dashboard's own, with its security headers.
    let head = page.to_lowercase();
    assert!(head.contains("content-type: text/html"), "{page}");
    assert!(head.contains("x-frame-options: deny"), "{page}");
    assert!(page.contains("<h1>Misdirected Request</h1>"), "{page}");
    // With a token, the token is the guard, whatever the name.
    let (_child, addr) = start(&db, Some("let-me-in")).await;
    let (status, _) = get_as(&addr, "dashboard.internal", "/", Some("let-me-in")).await;
    assert_eq!(status, 200);
}

/// A job page following a job that has not finished keeps a stream open; Ctrl-C still stops the
/// dashboard, after a short grace.
#[tokio::test]
async fn pgq_web_stops_on_ctrl_c_with_a_live_stream_open() {
    let db = TestDatabase::new().await;
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('Later', 'q', '{}') RETURNING id",
    )
    .fetch_one(db.pool())
    .await
    .unwrap();
    let (mut child, addr) = start(&db, None).await;
    let mut stream = TcpStream::connect(&addr).await.unwrap();
    let request = format!("GET /jobs/{id}/live HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = [0; 12];
    stream.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");

    let pid = child.id().unwrap().to_string();
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let exited = tokio::time::timeout(LIMIT, child.wait())
        .await
        .expect("pgq web stops after Ctrl-C")
        .unwrap();
    assert!(exited.success(), "{exited}");
    drop(stream);
}
