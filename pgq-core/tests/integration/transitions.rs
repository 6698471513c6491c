//! The database refuses every transition the state machine does not allow.

use pgq_testkit::TestDatabase;
use sqlx::PgPool;

const STATES: [&str; 6] = [
    "pending",
    "claimed",
    "running",
    "completed",
    "failed",
    "cancelled",
];

const ALLOWED: [(&str, &str); 13] = [
    ("pending", "claimed"),
    // A job whose handler starts in the round trip that claims it.
    ("pending", "running"),
    ("pending", "cancelled"),
    ("claimed", "running"),
    ("claimed", "pending"),
    ("claimed", "failed"),
    ("claimed", "cancelled"),
    ("running", "completed"),
    ("running", "failed"),
    ("running", "cancelled"),
    ("running", "pending"),
    ("failed", "pending"),
    ("cancelled", "pending"),
];

/// Walks a new job along allowed transitions to `state`.
const PATHS: [(&str, &[&str]); 6] = [
    ("pending", &[]),
    ("claimed", &["claimed"]),
    ("running", &["claimed", "running"]),
    ("completed", &["claimed", "running", "completed"]),
    ("failed", &["claimed", "running", "failed"]),
    ("cancelled", &["cancelled"]),
];

async fn job_in(pool: &PgPool, state: &str) -> i64 {
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO pgq.jobs (task, queue, payload) VALUES ('t', 'default', '{}') RETURNING id",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    let path = PATHS.iter().find(|(s, _)| *s == state).unwrap().1;
    for step in path {
        set_status(pool, id, step).await.unwrap();
    }
    id
}

async fn set_status(pool: &PgPool, id: i64, status: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE pgq.jobs SET status = $2, phase = pgq.phase_of($2), worker_id = 'w',
             claimed_at = now(),
             lease_expires_at = now() + interval '1 minute'
         WHERE id = $1",
    )
    .bind(id)
    .bind(status)
    .execute(pool)
    .await
    .map(|_| ())
}

#[tokio::test]
async fn every_transition_is_allowed_or_refused_as_the_state_machine_says() {
    let db = TestDatabase::new().await;
    for from in STATES {
        for to in STATES {
            if from == to {
                continue;
            }
            let id = job_in(db.pool(), from).await;
            let result = set_status(db.pool(), id, to).await;
            let allowed = ALLOWED.contains(&(from, to));
            match result {
                Ok(()) => assert!(allowed, "{from} -> {to} was accepted"),
                Err(err) => {
                    assert!(!allowed, "{from} -> {to} was refused: {err}");
                    let message = err.to_string();
                    let why = if (from, to) == ("claimed", "completed") {
                        // Allowed only with the job's start: see the test below.
                        "cannot complete from claimed without its start".to_owned()
                    } else {
                        format!("cannot move from {from} to {to}")
                    };
                    assert!(message.contains(&why), "{message}");
                }
            }
        }
    }
}

#[tokio::test]
async fn a_claimed_job_completes_only_with_its_start() {
    let db = TestDatabase::new().await;
    let complete = "UPDATE pgq.jobs SET status = 'completed', phase = 2, completed_at = now(),
                        started_at = $2
                    WHERE id = $1";
    let id = job_in(db.pool(), "claimed").await;
    for started_at in [None, Some("2000-01-01T00:00:00Z")] {
        let err = sqlx::query(complete)
            .bind(id)
            .bind(started_at.map(|at| at.parse::<chrono::DateTime<chrono::Utc>>().unwrap()))
            .execute(db.pool())
            .await
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("cannot complete from claimed without its start"),
            "started at {started_at:?}: {err}"
        );
    }
    sqlx::query(sqlx::AssertSqlSafe(complete.replace("$2", "now()")))
        .bind(id)
        .execute(db.pool())
        .await
        .expect("with its start, after its claim, a claimed job completes");
}

#[tokio::test]
async fn finished_jobs_cannot_be_rewritten_in_place() {
    let db = TestDatabase::new().await;
    for state in ["completed", "failed", "cancelled"] {
        let id = job_in(db.pool(), state).await;
        let err = sqlx::query("UPDATE pgq.jobs SET payload = '{\"x\": 1}' WHERE id = $1")
            .bind(id)
            .execute(db.pool())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("cannot move"), "{state}: {err}");
    }
}

#[tokio::test]
async fn jobs_are_inserted_as_pending_only() {
    let db = TestDatabase::new().await;
    let err = sqlx::query(
        "INSERT INTO pgq.jobs (task, queue, payload, status) VALUES ('t', 'default', '{}', 'completed')",
    )
    .execute(db.pool())
    .await
    .unwrap_err();
    assert!(err.to_string().contains("inserted as pending"), "{err}");
}

#[tokio::test]
async fn a_held_job_must_name_its_worker_and_lease() {
    let db = TestDatabase::new().await;
    let id = job_in(db.pool(), "pending").await;
    let err = sqlx::query("UPDATE pgq.jobs SET status = 'claimed', phase = 1 WHERE id = $1")
        .bind(id)
        .execute(db.pool())
        .await
        .unwrap_err();
    let code = err.as_database_error().and_then(|e| e.code());
    assert_eq!(code.as_deref(), Some("23514"), "{err}");
    assert!(
        err.to_string()
            .contains("without its worker, claim time and lease"),
        "{err}"
    );
}

#[tokio::test]
async fn the_phase_is_written_with_the_status_or_refused() {
    let db = TestDatabase::new().await;
    let err = sqlx::query(
        "INSERT INTO pgq.jobs (task, queue, payload, phase) VALUES ('t', 'default', '{}', 1)",
    )
    .execute(db.pool())
    .await
    .unwrap_err();
    assert!(
        err.to_string().contains("pending with phase 1, not 0"),
        "{err}"
    );

    let id = job_in(db.pool(), "pending").await;
    for (status, phase) in [("claimed", 0), ("pending", 1), ("cancelled", 0)] {
        let err = sqlx::query(
            "UPDATE pgq.jobs SET status = $2, phase = $3, worker_id = 'w', claimed_at = now(),
                 lease_expires_at = now() + interval '1 minute'
             WHERE id = $1",
        )
        .bind(id)
        .bind(status)
        .bind(phase as i16)
        .execute(db.pool())
        .await
        .unwrap_err();
        let code = err
            .as_database_error()
            .and_then(|e| e.code())
            .unwrap_or_default()
            .into_owned();
        assert_eq!(code, "23514", "{status} with phase {phase}: {err}");
        assert!(err.to_string().contains("with phase"), "{err}");
    }
    // Written together, the same move is accepted.
    set_status(db.pool(), id, "claimed").await.unwrap();
}
