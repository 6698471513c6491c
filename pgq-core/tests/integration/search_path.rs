//! Other roles' objects never run inside pgq's statements: look-alike functions and operators
//! planted in `public`, a schema on every default search path, for everything pgq calls — each
//! a closer match for pgq's argument types than pg_catalog's own — never run while pgq enqueues,
//! works, fails, retries, snoozes, cancels, rescues, reports progress, cleans and migrates.

use std::time::Duration;

use pgq_core::{
    EnqueueOptions, Handler, JobContext, JobOutcome, Retention, Task, TaskError, Worker,
    async_trait,
};
use pgq_testkit::TestDatabase;
use serde::{Deserialize, Serialize};

use crate::support;

/// What each planted object records when it runs.
const PLANT: &str = r#"
CREATE TABLE public.planted (what text NOT NULL);
CREATE FUNCTION public.planted(what text) RETURNS void LANGUAGE sql
    AS $$ INSERT INTO public.planted VALUES (what) $$;

CREATE FUNCTION public.now() RETURNS timestamptz LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('now'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('clock_timestamp'); RETURN pg_catalog.now(); END $$;
CREATE FUNCTION public.random() RETURNS double precision LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('random'); RETURN 0.5; END $$;
CREATE FUNCTION public.power(integer, integer) RETURNS double precision LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('power'); RETURN 1; END $$;
CREATE FUNCTION public.array_position(text[], text) RETURNS integer LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('array_position'); RETURN 1; END $$;
CREATE FUNCTION public.unnest(bigint[]) RETURNS SETOF bigint LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('unnest(bigint[])'); END $$;
CREATE FUNCTION public.unnest(integer[]) RETURNS SETOF integer LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('unnest(integer[])'); END $$;
CREATE FUNCTION public.unnest(text[]) RETURNS SETOF text LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('unnest(text[])'); END $$;
CREATE FUNCTION public.nextval(text) RETURNS bigint LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('nextval'); RETURN 1; END $$;
CREATE FUNCTION public.pg_notify(text, pgq.queue_name) RETURNS void LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('pg_notify'); END $$;
CREATE FUNCTION public.jsonb_array_elements(pgq.error_history) RETURNS SETOF jsonb
    LANGUAGE plpgsql AS $$ BEGIN PERFORM public.planted('jsonb_array_elements'); END $$;
CREATE FUNCTION public.jsonb_build_object(text, integer, text, text, text, timestamptz)
    RETURNS jsonb LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('jsonb_build_object'); RETURN '{}'; END $$;

CREATE FUNCTION public.mul(bigint, interval) RETURNS interval LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('* (bigint, interval)'); RETURN $2; END $$;
CREATE OPERATOR public.* (LEFTARG = bigint, RIGHTARG = interval, FUNCTION = public.mul);
CREATE FUNCTION public.status_eq(pgq.job_status, pgq.job_status) RETURNS boolean
    LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('= (job_status)'); RETURN $1::text = $2::text; END $$;
CREATE OPERATOR public.= (LEFTARG = pgq.job_status, RIGHTARG = pgq.job_status,
                          FUNCTION = public.status_eq);
CREATE FUNCTION public.attempts_eq(pgq.attempt_count, integer) RETURNS boolean
    LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('= (attempt_count, integer)');
             RETURN $1::integer = $2; END $$;
CREATE OPERATOR public.= (LEFTARG = pgq.attempt_count, RIGHTARG = integer,
                          FUNCTION = public.attempts_eq);
CREATE FUNCTION public.attempts_plus(pgq.attempt_count, integer) RETURNS integer
    LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('+ (attempt_count, integer)');
             RETURN $1::integer + $2; END $$;
CREATE OPERATOR public.+ (LEFTARG = pgq.attempt_count, RIGHTARG = integer,
                          FUNCTION = public.attempts_plus);
CREATE FUNCTION public.attempts_ge(pgq.attempt_count, pgq.max_attempts) RETURNS boolean
    LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('>= (attempt_count, max_attempts)');
             RETURN $1::integer >= $2::integer; END $$;
CREATE OPERATOR public.>= (LEFTARG = pgq.attempt_count, RIGHTARG = pgq.max_attempts,
                           FUNCTION = public.attempts_ge);
CREATE FUNCTION public.run_le(pgq.run_time, timestamptz) RETURNS boolean LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('<= (run_time, timestamptz)');
             RETURN $1::timestamptz <= $2; END $$;
CREATE OPERATOR public.<= (LEFTARG = pgq.run_time, RIGHTARG = timestamptz,
                           FUNCTION = public.run_le);
CREATE FUNCTION public.task_eq(pgq.task_name, text) RETURNS boolean LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('= (task_name, text)'); RETURN $1::text = $2; END $$;
CREATE OPERATOR public.= (LEFTARG = pgq.task_name, RIGHTARG = text, FUNCTION = public.task_eq);
CREATE FUNCTION public.queue_eq(pgq.queue_name, text) RETURNS boolean LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('= (queue_name, text)'); RETURN $1::text = $2; END $$;
CREATE OPERATOR public.= (LEFTARG = pgq.queue_name, RIGHTARG = text, FUNCTION = public.queue_eq);
CREATE FUNCTION public.worker_eq(pgq.worker_name, text) RETURNS boolean LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('= (worker_name, text)'); RETURN $1::text = $2; END $$;
CREATE OPERATOR public.= (LEFTARG = pgq.worker_name, RIGHTARG = text,
                          FUNCTION = public.worker_eq);
CREATE FUNCTION public.concat_worker(text, pgq.worker_name) RETURNS text LANGUAGE plpgsql
    AS $$ BEGIN PERFORM public.planted('|| (text, worker_name)'); RETURN $1 || $2::text; END $$;
CREATE OPERATOR public.|| (LEFTARG = text, RIGHTARG = pgq.worker_name,
                           FUNCTION = public.concat_worker);
"#;

/// Succeeds, fails, snoozes or waits for cancellation, as told.
#[derive(Debug, Serialize, Deserialize, Task)]
#[task(queue = "planted", unique_key = "planted:{key}", lease = "1s")]
struct Exercise {
    key: u32,
    mode: String,
}

#[async_trait]
impl Handler for Exercise {
    async fn handle(self, ctx: &JobContext) -> Result<(), TaskError> {
        ctx.progress(40, "working").await;
        match self.mode.as_str() {
            "fail" => Err(TaskError::retry("default backoff, please")),
            "snooze" => Err(TaskError::snooze(Duration::from_secs(60))),
            "cancel" => {
                ctx.cancelled().await;
                Err(TaskError::fail("cancelled"))
            }
            _ => Ok(()),
        }
    }
}

async fn planted(db: &TestDatabase) -> Vec<String> {
    sqlx::query_scalar("SELECT what FROM public.planted ORDER BY what")
        .fetch_all(db.pool())
        .await
        .unwrap()
}

fn exercise(key: u32, mode: &str) -> Exercise {
    Exercise {
        key,
        mode: mode.into(),
    }
}

#[tokio::test]
async fn nothing_planted_on_the_search_path_runs_inside_pgq() {
    let db = TestDatabase::new().await;
    sqlx::raw_sql(PLANT).execute(db.pool()).await.unwrap();
    let client = db.client();
    client.migrate().await.unwrap();

    let ok = client.enqueue(exercise(1, "ok")).await.unwrap().id();
    let duplicate = client.enqueue(exercise(1, "ok")).await.unwrap();
    assert!(duplicate.is_duplicate());
    client
        .enqueue_with(exercise(1, "ok"), EnqueueOptions::default().replace())
        .await
        .unwrap();
    let fail = client.enqueue(exercise(2, "fail")).await.unwrap().id();
    let snooze = client.enqueue(exercise(3, "snooze")).await.unwrap().id();
    let cancel = client.enqueue(exercise(4, "cancel")).await.unwrap().id();
    client
        .enqueue_with(
            exercise(5, "ok"),
            EnqueueOptions::default().delay(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    client
        .enqueue_many((10..20).map(|key| exercise(key, "ok")))
        .await
        .unwrap();
    let mut tx = client.pool().begin().await.unwrap();
    client
        .enqueue_in(&mut tx, exercise(30, "ok"))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let mut watch = client.watch(ok).await.unwrap();

    let worker = Worker::builder(client.clone())
        .queue("planted", 4)
        .rescue_interval(Duration::from_millis(200))
        .build()
        .unwrap();
    let mut events = worker.events();
    let handle = worker.start();
    let outcomes = support::all_finished(&mut events, &[ok, fail, snooze]).await;
    assert_eq!(outcomes[&ok], JobOutcome::Completed);
    assert_eq!(outcomes[&fail], JobOutcome::Retrying);
    assert_eq!(outcomes[&snooze], JobOutcome::Snoozed);
    while watch.next().await.unwrap().is_some() {}
    support::held(db.pool(), cancel).await;
    client.cancel(cancel).await.unwrap();
    assert_eq!(
        support::finished(&mut events, cancel).await.0,
        JobOutcome::Cancelled
    );
    handle.shutdown().await.unwrap();

    client.retry(cancel).await.unwrap();
    client.stats().await.unwrap();
    client.rescue_expired().await.unwrap();
    client.release_worker("nobody").await.unwrap();
    db.advance(Duration::from_secs(48 * 3600)).await;
    client
        .delete_finished(Retention {
            completed: Duration::from_secs(1),
            failed: Duration::from_secs(1),
        })
        .await
        .unwrap();
    client.migrate().await.unwrap();
    assert_eq!(planted(&db).await, Vec::<String>::new());
}
