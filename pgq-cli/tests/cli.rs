//! The `pgq` binary against a real database of its own: JSON output that parses, actions that
//! ask before touching many jobs and refuse without a terminal, dry runs that change nothing,
//! and bad input refused with exit code 2 before the database is touched.

use std::process::{Command, Output, Stdio};

use pgq_core::{JobId, Task};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "cli")]
struct Mail {
    to: String,
}

/// Runs `pgq` with `args` on the test's database, with no terminal on standard input.
fn pgq(db: &TestDatabase, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pgq"))
        .args(args)
        .env("DATABASE_URL", db.url())
        .env_remove("PGQ_SCHEMA")
        .stdin(Stdio::null())
        .output()
        .expect("the pgq binary runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json(output: &Output) -> Value {
    assert!(output.status.success(), "{}", stderr(output));
    serde_json::from_slice(&output.stdout).expect("stdout is one JSON document")
}

/// `count` jobs made failed by hand, with an error to search for.
async fn failed_jobs(db: &TestDatabase, count: usize) -> Vec<JobId> {
    let client = db.client();
    let ids: Vec<JobId> = client
        .enqueue_many((0..count).map(|n| Mail {
            to: format!("{n}@example.com"),
        }))
        .await
        .unwrap()
        .iter()
        .map(|e| e.id())
        .collect();
    let ids_raw: Vec<i64> = ids.iter().map(|id| id.get()).collect();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'running', phase = 1, attempts = 1, worker_id = 'w',
                claimed_at = now(), started_at = now(), lease_expires_at = now() + interval '1 hour'
         WHERE id = ANY($1)",
    )
    .bind(&ids_raw)
    .execute(db.pool())
    .await
    .unwrap();
    sqlx::query(
        "UPDATE pgq.jobs SET status = 'failed', phase = 2, completed_at = now(),
                lease_expires_at = NULL, last_error = 'smtp: 550 mailbox full',
                errors = jsonb_build_array(jsonb_build_object(
                    'attempt', 1, 'error', 'smtp: 550 mailbox full', 'at', now()))
         WHERE id = ANY($1)",
    )
    .bind(&ids_raw)
    .execute(db.pool())
    .await
    .unwrap();
    ids
}

async fn count(db: &TestDatabase, status: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM pgq.jobs WHERE status = $1")
        .bind(status)
        .fetch_one(db.pool())
        .await
        .unwrap()
}

#[tokio::test]
async fn listings_stats_and_migrations_print_json_that_parses() {
    let db = TestDatabase::new().await;
    let failed = failed_jobs(&db, 2).await;
    let pending = db
        .client()
        .enqueue(Mail {
            to: "x@example.com".into(),
        })
        .await
        .unwrap()
        .id();

    let listed = json(&pgq(
        &db,
        &[
            "--json", "jobs", "list", "--status", "failed", "--error", "MAILBOX",
        ],
    ));
    let ids: Vec<i64> = listed["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|job| job["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![failed[1].get(), failed[0].get()]);
    assert_eq!(listed["jobs"][0]["status"], "failed");
    assert_eq!(listed["next"], Value::Null);

    let stats = json(&pgq(&db, &["--json", "stats"]));
    assert_eq!(stats[0]["queue"], "cli");
    assert_eq!(stats[0]["due"], 1);

    let shown = json(&pgq(
        &db,
        &["--json", "jobs", "show", &failed[0].to_string()],
    ));
    assert_eq!(shown["payload"]["to"], "0@example.com");
    assert_eq!(shown["errors"][0]["error"], "smtp: 550 mailbox full");
    let human = pgq(&db, &["jobs", "show", &pending.to_string()]);
    assert!(human.status.success(), "{}", stderr(&human));
    assert!(
        stdout(&human).contains("x@example.com"),
        "{}",
        stdout(&human)
    );

    let migrations = json(&pgq(&db, &["--json", "migrate", "--status"]));
    let states = migrations.as_array().unwrap();
    assert!(!states.is_empty());
    assert!(states.iter().all(|m| !m["applied_at"].is_null()));
    assert!(
        json(&pgq(&db, &["--json", "migrate"]))["applied"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let sql = pgq(&db, &["migrate", "--print-sql", "--schema", "billing_jobs"]);
    assert!(
        stdout(&sql).contains("CREATE TABLE \"billing_jobs\".jobs"),
        "{}",
        stderr(&sql)
    );
}

#[tokio::test]
async fn a_bulk_action_asks_first_and_without_a_terminal_needs_yes() {
    let db = TestDatabase::new().await;
    failed_jobs(&db, 12).await;

    let refused = pgq(&db, &["jobs", "retry", "--status", "failed"]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("--yes"), "{}", stderr(&refused));
    assert_eq!(count(&db, "failed").await, 12, "nothing changed");

    let done = json(&pgq(
        &db,
        &[
            "--json",
            "jobs",
            "retry",
            "--status",
            "failed",
            "--yes",
            "--attempts",
            "3",
        ],
    ));
    assert_eq!(done["changed"].as_array().unwrap().len(), 12);
    assert_eq!(count(&db, "pending").await, 12);
}

#[tokio::test]
async fn a_dry_run_shows_what_would_change_and_changes_nothing() {
    let db = TestDatabase::new().await;
    let failed = failed_jobs(&db, 12).await;
    let dry = json(&pgq(
        &db,
        &["--json", "jobs", "delete", "--queue", "cli", "--dry-run"],
    ));
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["would_change"].as_array().unwrap().len(), 12);
    assert_eq!(count(&db, "failed").await, 12);

    let by_id = pgq(
        &db,
        &["jobs", "cancel", &failed[0].to_string(), "--dry-run"],
    );
    assert!(by_id.status.success());
    assert!(
        stdout(&by_id).contains("it is failed"),
        "{}",
        stdout(&by_id)
    );
    assert_eq!(count(&db, "failed").await, 12);
}

#[tokio::test]
async fn an_action_on_a_job_in_the_wrong_state_says_which_state_it_was_in() {
    let db = TestDatabase::new().await;
    let pending = db
        .client()
        .enqueue(Mail {
            to: "p@example.com".into(),
        })
        .await
        .unwrap()
        .id();
    let output = pgq(&db, &["jobs", "retry", &pending.to_string()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stdout(&output).contains(&format!("cannot retry job {pending}: it is pending")),
        "{}",
        stdout(&output)
    );
    let run_now = pgq(&db, &["jobs", "run-now", &pending.to_string()]);
    assert!(run_now.status.success(), "{}", stderr(&run_now));
    let missing = pgq(&db, &["jobs", "show", "999999"]);
    assert_eq!(missing.status.code(), Some(1));
    assert!(stderr(&missing).contains("job 999999 not found"));
}

/// Runs `pgq` with `args` writing to a pipe whose reader has gone, as `pgq ... | head -1` after
/// `head` exits: every write to standard output fails.
fn pgq_into_closed_pipe(db: &TestDatabase, args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(env!("CARGO_BIN_EXE_pgq"))
        .args(args)
        .env("DATABASE_URL", db.url())
        .env_remove("PGQ_SCHEMA")
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("the pgq binary runs")
}

#[tokio::test]
async fn a_closed_output_pipe_leaves_the_exit_code_to_what_the_command_did() {
    let db = TestDatabase::new().await;
    let failed = failed_jobs(&db, 2).await;
    let listed = pgq_into_closed_pipe(&db, &["jobs", "list", "--status", "failed"]);
    assert_eq!(listed.status.code(), Some(0), "{}", stderr(&listed));
    assert_eq!(stderr(&listed), "");
    // The retry is done and exits 0; a retry of a job in the wrong state still exits 1.
    let retried = pgq_into_closed_pipe(&db, &["jobs", "retry", &failed[0].to_string()]);
    assert_eq!(retried.status.code(), Some(0), "{}", stderr(&retried));
    assert_eq!(stderr(&retried), "");
    assert_eq!(count(&db, "failed").await, 1);
    let again = pgq_into_closed_pipe(&db, &["jobs", "retry", &failed[0].to_string()]);
    assert_eq!(again.status.code(), Some(1), "{}", stderr(&again));
}

/// Through a transaction pooler, told so: every command's statements unnamed, each in a
/// transaction of its own, whatever server connection each lands on.
#[tokio::test]
async fn behind_a_pooler_the_commands_work_when_told_so() {
    let db = TestDatabase::new().await;
    let failed = failed_jobs(&db, 3).await;
    let server = db.connect_options();
    let upstream = format!("{}:{}", server.get_host(), server.get_port())
        .parse()
        .expect("a socket address");
    let bouncer = pgq_test_support::PgBouncer::new(upstream).await;
    let url = db.url().replacen(
        &format!("{}:{}", server.get_host(), server.get_port()),
        &format!("127.0.0.1:{}", bouncer.port()),
        1,
    );
    assert_ne!(url, db.url(), "the URL names the pooler");
    let through = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_pgq"))
            .args(args)
            .env("DATABASE_URL", &url)
            .env("PGQ_BEHIND_POOLER", "1")
            .env_remove("PGQ_SCHEMA")
            .stdin(Stdio::null())
            .output()
            .expect("the pgq binary runs")
    };
    // Each command more than once, so that its statements meet other server connections.
    for _ in 0..3 {
        let listed = json(&through(&["jobs", "list", "--status", "failed", "--json"]));
        assert!(
            listed.to_string().contains(&failed[0].to_string()),
            "{listed}"
        );
        let stats = through(&["stats"]);
        assert!(stats.status.success(), "{}", stderr(&stats));
    }
    let retried = through(&["jobs", "retry", &failed[0].to_string()]);
    assert!(retried.status.success(), "{}", stderr(&retried));
    assert_eq!(count(&db, "failed").await, 2);
}

#[tokio::test]
async fn queues_pause_and_resume_from_the_command_line() {
    let db = TestDatabase::new().await;
    let paused = pgq(&db, &["queues", "pause", "cli"]);
    assert!(paused.status.success(), "{}", stderr(&paused));
    let queues = json(&pgq(&db, &["--json", "queues", "list"]));
    assert_eq!(queues[0]["name"], "cli");
    assert!(!queues[0]["paused_at"].is_null());
    // A queue that is not paused (a typo, say) is not reported resumed.
    let typo = pgq(&db, &["queues", "resume", "clj"]);
    assert_eq!(typo.status.code(), Some(1));
    assert!(
        stderr(&typo).contains("queue clj is not paused"),
        "{}",
        stderr(&typo)
    );
    assert!(pgq(&db, &["queues", "resume", "cli"]).status.success());
    let queues = json(&pgq(&db, &["--json", "queues", "list"]));
    assert!(queues.as_array().unwrap().is_empty(), "{queues}");
    assert_eq!(
        pgq(&db, &["queues", "resume", "cli"]).status.code(),
        Some(1)
    );
    let workers = json(&pgq(&db, &["--json", "workers"]));
    assert_eq!(workers, Value::Array(Vec::new()));
}

#[tokio::test]
async fn a_queue_limit_is_set_and_lifted_from_the_command_line() {
    let db = TestDatabase::new().await;
    let set = pgq(&db, &["queues", "limit", "cli", "3"]);
    assert!(set.status.success(), "{}", stderr(&set));
    assert!(
        stdout(&set).contains("at most 3 jobs at once"),
        "{}",
        stdout(&set)
    );
    let queues = json(&pgq(&db, &["--json", "queues", "list"]));
    assert_eq!(
        (&queues[0]["name"], &queues[0]["limit"]),
        (&Value::from("cli"), &Value::from(3))
    );
    let table = stdout(&pgq(&db, &["queues", "list"]));
    assert!(table.lines().next().unwrap().contains("LIMIT"), "{table}");
    assert!(
        pgq(&db, &["queues", "rate", "cli", "20/s"])
            .status
            .success()
    );
    let table = stdout(&pgq(&db, &["queues", "list"]));
    assert!(table.lines().next().unwrap().contains("RATE"), "{table}");
    assert!(table.contains("20/1s"), "{table}");
    assert!(
        pgq(&db, &["queues", "rate", "cli", "none"])
            .status
            .success()
    );
    for bad in ["0", "-1", "many"] {
        let refused = pgq(&db, &["queues", "limit", "cli", bad]);
        assert_eq!(
            refused.status.code(),
            Some(2),
            "{bad}: {}",
            stderr(&refused)
        );
    }
    assert!(
        pgq(&db, &["queues", "limit", "cli", "none"])
            .status
            .success()
    );
    let queues = json(&pgq(&db, &["--json", "queues", "list"]));
    assert!(queues.as_array().unwrap().is_empty(), "{queues}");
}

#[tokio::test]
async fn schedules_list_with_their_last_and_next_run_and_leader() {
    let db = TestDatabase::new().await;
    let client = db.client();
    let at = |text: &str| chrono::DateTime::parse_from_rfc3339(text).unwrap().to_utc();
    let schedule = pgq_core::Schedule::cron("0 0 * * * *")
        .time_zone("Europe/Paris")
        .missed(pgq_core::Missed::RunOnce);
    let make = || Mail { to: "ops".into() };
    let first = at("2020-01-01T00:30:00Z");
    pgq_core::__testkit::enqueue_due(&client, schedule.clone(), make, first)
        .await
        .unwrap();
    let ids = pgq_core::__testkit::enqueue_due(&client, schedule, make, at("2020-01-01T01:00:05Z"))
        .await
        .unwrap();
    assert_eq!(ids.len(), 1);
    // A hand-written row with a hostile name is shown as text.
    sqlx::query(
        "INSERT INTO pgq.schedules (name, task, cron, time_zone, missed, role, done_through)
         VALUES ('evil\u{1b}[31m\nname', 'Mail', 'not a cron', 'UTC', 'sometimes', 'r', now())",
    )
    .execute(db.pool())
    .await
    .unwrap();

    let listed = json(&pgq(&db, &["--json", "schedules"]));
    let mail = &listed[0];
    assert_eq!(mail["name"], "Mail");
    assert_eq!(mail["cron"], "0 0 * * * *");
    assert_eq!(mail["time_zone"], "Europe/Paris");
    assert_eq!(mail["missed"], "run_once");
    assert_eq!(mail["last_run"], "2020-01-01T01:00:00Z");
    assert_eq!(mail["last_job"], ids[0].get());
    assert!(mail["next_run"].is_string(), "{mail}");
    assert!(mail["leader"].is_null());
    let evil = &listed[1];
    assert!(
        evil["missed"].is_null() && evil["next_run"].is_null(),
        "{evil}"
    );

    let table = pgq(&db, &["schedules"]);
    assert!(table.status.success(), "{}", stderr(&table));
    let text = stdout(&table);
    assert!(
        text.contains("Europe/Paris") && text.contains("run_once"),
        "{text}"
    );
    assert!(text.contains("2020-01-01 01:00:00"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "control characters are not printed: {text:?}"
    );
    assert_eq!(
        text.lines().count(),
        3,
        "a header and one line a schedule: {text}"
    );
}

#[tokio::test]
async fn bad_input_is_a_usage_error_before_the_database_is_touched() {
    let db = TestDatabase::new().await;
    failed_jobs(&db, 1).await;
    let cases: &[&[&str]] = &[
        &["jobs", "list", "--status", "done"],
        &["jobs", "list", "--created-after", "last tuesday"],
        &["jobs", "list", "--tag", "novalue"],
        &["jobs", "list", "--limit", "0"],
        &["jobs", "list", "--queue", "has space"],
        &[
            "jobs",
            "list",
            "--finished-after",
            "1h",
            "--finished-before",
            "2h",
        ],
        &["jobs", "list", "--bogus"],
        &["jobs", "retry"],
        &["jobs", "retry", "1", "--status", "failed"],
        &["jobs", "show", "abc"],
        &["queues", "pause", "bad name"],
        &["--schema", "Bad-Schema", "stats"],
        // Another scheme's URL, which sqlx would read as PostgreSQL's host and database.
        &["--database-url", "mysql://root@127.0.0.1/postgres", "stats"],
    ];
    for args in cases {
        let output = pgq(&db, args);
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).trim().is_empty(), "{args:?} says why");
    }
    assert!(stderr(&pgq(&db, &["jobs", "list", "--status", "done"])).contains("unknown status"));
    assert_eq!(count(&db, "failed").await, 1);
}

#[test]
fn a_connection_failure_names_the_url_without_its_password() {
    // Port 1: nothing listens there.
    let output = Command::new(env!("CARGO_BIN_EXE_pgq"))
        .args([
            "stats",
            "--database-url",
            "postgres://app:hunter2@127.0.0.1:1/app",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(
        message.contains("cannot connect to postgres://app@127.0.0.1:1/app"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn a_database_that_is_not_there_is_named_with_the_servers_reason() {
    let db = TestDatabase::new().await;
    let missing = format!("{}_gone", db.name());
    let url = db.url().replacen(db.name(), &missing, 1);
    let output = Command::new(env!("CARGO_BIN_EXE_pgq"))
        .args(["stats", "--database-url", &url])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("cannot connect to"), "{message}");
    assert!(
        message.contains(&format!(
            "database \"{missing}\" does not exist (SQLSTATE 3D000)"
        )),
        "{message}"
    );
    // Not the line of PostgreSQL's source that raised it, which sqlx's own text adds.
    assert!(!message.contains(" at line "), "{message}");
}

/// Stored text can hold terminal escape sequences (an error, a stage, a unique key): `jobs show`
/// and `jobs list` write each control character as its escape, never raw.
#[tokio::test]
async fn stored_control_characters_reach_the_terminal_escaped() {
    let db = TestDatabase::new().await;
    let hostile = "\u{1b}]0;pwned\u{7}\u{1b}[2J\nforged line";
    let id = db
        .client()
        .enqueue(Mail {
            // JSON escapes U+0000 to U+001F itself, not DEL or the C1 controls (CSI here).
            to: "x@example.com\u{9b}2J\u{7f}".into(),
        })
        .await
        .unwrap()
        .id();
    // Along the allowed moves: running with the stage, then failed with the error.
    for (status, phase) in [("running", 1), ("failed", 2)] {
        sqlx::query(
            "UPDATE pgq.jobs SET status = $2, phase = $3, attempts = 1, worker_id = 'w',
                    claimed_at = now(), started_at = now(), current_stage = $4,
                    lease_expires_at = CASE WHEN $3 = 1 THEN now() + interval '1 hour' END,
                    completed_at = CASE WHEN $3 = 2 THEN now() END,
                    last_error = CASE WHEN $3 = 2 THEN $4 END,
                    errors = CASE WHEN $3 = 2 THEN jsonb_build_array(jsonb_build_object(
                        'attempt', 1, 'error', $4::text, 'at', now())) ELSE errors END
             WHERE id = $1",
        )
        .bind(id.get())
        .bind(status)
        .bind(phase)
        .bind(hostile)
        .execute(db.pool())
        .await
        .unwrap();
    }
    let shown = id.to_string();
    for args in [
        vec!["jobs", "show", &*shown],
        vec!["jobs", "list", "--status", "failed"],
        // JSON escapes them as `\u` escapes, which read back as they were stored.
        vec!["--json", "jobs", "show", &*shown],
        vec!["--json", "jobs", "list", "--status", "failed"],
    ] {
        let output = pgq(&db, &args);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let out = stdout(&output);
        assert!(
            !out.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{7f}']),
            "{args:?}: {out:?}"
        );
        assert!(!out.contains("\nforged line"), "{args:?}: {out:?}");
    }
    assert!(stdout(&pgq(&db, &["jobs", "show", &id.to_string()])).contains("\\u{1b}]0;pwned"));
    let read_back = json(&pgq(&db, &["--json", "jobs", "show", &shown]));
    assert_eq!(read_back["payload"]["to"], "x@example.com\u{9b}2J\u{7f}");
}

/// What is refused without the database: a queue name no queue can have, an age whose unit is
/// not ASCII. An unreachable database shows it: the answer is the usage error, exit 2.
#[test]
fn bad_names_and_times_are_refused_before_connecting() {
    for args in [
        &["queues", "pause", "bad name"][..],
        &["queues", "limit", "bad name", "3"],
        &["queues", "rate", "", "5/s"],
        &["queues", "resume", &"q".repeat(65)],
        &["jobs", "list", "--finished-after", "7д"],
        &["jobs", "list", "--created-after", "é"],
        // Filters no job can match, and a count out of range, are mistakes, not empty actions.
        &[
            "jobs", "delete", "--min-id", "100", "--max-id", "5", "--yes",
        ],
        &[
            "jobs",
            "delete",
            "--tag",
            "tenant=acme",
            "--tag",
            "tenant=globex",
            "--yes",
        ],
        &["jobs", "retry", "--status", "completed", "--yes"],
        &["jobs", "cancel", "--status", "failed", "--yes"],
        // Only finished jobs have a finished time.
        &["jobs", "cancel", "--finished-after", "1h", "--yes"],
        &[
            "jobs",
            "delete",
            "--force",
            "--status",
            "pending",
            "--finished-before",
            "2026-01-01",
            "--yes",
        ],
        &[
            "jobs",
            "list",
            "--status",
            "running",
            "--finished-after",
            "1h",
        ],
        &["queues", "limit", "q", "3000000000"],
        // An empty range whichever flag comes first: ages count from one moment.
        &[
            "jobs",
            "list",
            "--created-before",
            "1h",
            "--created-after",
            "1h",
        ],
        &[
            "jobs",
            "list",
            "--created-after",
            "1h",
            "--created-before",
            "1h",
        ],
        // Eleven jobs would need a question, and there is no terminal to ask on.
        &[
            "jobs", "retry", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11",
        ],
        &[
            "jobs",
            "retry",
            "--status",
            "failed",
            "--attempts",
            "0",
            "--yes",
        ],
        &[
            "jobs",
            "retry",
            "--status",
            "failed",
            "--attempts",
            "1001",
            "--yes",
        ],
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_pgq"))
            .args(args)
            .args(["--database-url", "postgres://app@127.0.0.1:1/app"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(2),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).contains("cannot connect"), "{args:?}");
    }
}

/// A libpq `key=value` string, or a URL whose password holds `?` or `@`, never shows its
/// password.
#[test]
fn a_connection_string_never_shows_its_password() {
    for url in [
        "host=127.0.0.1 port=1 user=app password=s3cret",
        "postgres://app:s3c?ret@127.0.0.1:1/app",
        "postgres://app:s3c@ret@127.0.0.1:1/app",
        // An `@` in the query string, as in Azure's `user@server` logins.
        "postgres://127.0.0.1:1/app?user=admin@srv&password=s3cret",
        "postgres://app:s3cret@127.0.0.1:1/app?application_name=ops@laptop",
        "postgres://app@127.0.0.1:1/app?Password=s3cret&user=x@y",
    ] {
        let output = Command::new(env!("CARGO_BIN_EXE_pgq"))
            .args(["stats", "--database-url", url])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_ne!(output.status.code(), Some(0), "{url}");
        let message = stderr(&output);
        assert!(!message.contains("s3c"), "{url}: {message}");
        assert!(!message.is_empty(), "{url} says why");
    }
}
