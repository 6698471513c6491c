//! `?` in a handler works on any error — a std error, `Box<dyn Error + Send + Sync>`,
//! `anyhow::Error`, a `String` — retries the job, and records the error with its causes.

use std::error::Error;
use std::fmt;

use anyhow::Context as _;
use pgq_core::{Handler, JobContext, JobOutcome, Task, TaskAction, TaskError, async_trait};
use pgq_testkit::{TestContext, TestDatabase, drain};
use serde::{Deserialize, Serialize};

/// Which kind of error the handler's `?` meets.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum Via {
    Anyhow,
    Boxed,
    Std,
    Text,
}

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "errors", max_attempts = 1)]
struct Deliver {
    via: Via,
}

/// A library's error with a cause, as `thiserror` would derive it.
#[derive(Debug)]
struct SmtpError {
    source: std::io::Error,
}

impl fmt::Display for SmtpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("smtp handshake failed")
    }
}

impl Error for SmtpError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&self.source)
    }
}

fn refused() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused")
}

fn read_template(name: &str) -> anyhow::Result<String> {
    Err(refused()).with_context(|| format!("reading template {name:?}"))
}

fn send() -> Result<(), Box<dyn Error + Send + Sync>> {
    Err(Box::new(SmtpError { source: refused() }))
}

fn quota() -> Result<(), String> {
    Err("quota of 3 mails a minute exceeded".to_owned())
}

#[async_trait]
impl Handler for Deliver {
    async fn handle(self, _ctx: &JobContext) -> Result<(), TaskError> {
        match self.via {
            Via::Anyhow => {
                read_template("welcome").context("rendering the welcome mail")?;
            }
            Via::Boxed => send()?,
            Via::Std => {
                "12x".parse::<u32>()?;
            }
            Via::Text => quota()?,
        }
        Ok(())
    }
}

const ANYHOW_MESSAGE: &str =
    r#"rendering the welcome mail: reading template "welcome": connection refused"#;

async fn run(via: Via) -> TaskError {
    TestContext::new()
        .run(Deliver { via })
        .await
        .expect_err("the handler fails")
}

#[tokio::test]
async fn anyhow_errors_keep_their_context_chain() {
    let err = run(Via::Anyhow).await;
    assert_eq!(err.action(), TaskAction::Retry);
    assert_eq!(err.message(), ANYHOW_MESSAGE);
}

#[tokio::test]
async fn boxed_errors_keep_their_causes() {
    let err = run(Via::Boxed).await;
    assert_eq!(err.action(), TaskAction::Retry);
    assert_eq!(err.message(), "smtp handshake failed: connection refused");
}

#[tokio::test]
async fn std_errors_and_strings_retry_with_their_message() {
    let err = run(Via::Std).await;
    assert_eq!(err.action(), TaskAction::Retry);
    assert_eq!(err.message(), "invalid digit found in string");

    let err = run(Via::Text).await;
    assert_eq!(err.action(), TaskAction::Retry);
    assert_eq!(err.message(), "quota of 3 mails a minute exceeded");
}

#[tokio::test]
async fn the_job_records_the_whole_chain() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let id = client
        .enqueue(Deliver { via: Via::Anyhow })
        .await
        .unwrap()
        .id();
    let drained = drain(&client, "errors").await;
    assert_eq!(drained.len(), 1);
    assert_eq!(drained[0].outcome, JobOutcome::Failed);
    assert_eq!(drained[0].error.as_deref(), Some(ANYHOW_MESSAGE));
    let job = client.job(id).await.unwrap().expect("failed jobs are kept");
    assert_eq!(job.last_error.as_deref(), Some(ANYHOW_MESSAGE));
}
