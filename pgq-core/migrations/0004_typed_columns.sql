-- Column rules as domains. PostgreSQL re-reads a table's CHECK constraints, generated-column
-- expressions and trigger WHEN clauses from their stored text for every statement that writes
-- the table; for a one-row insert that was the larger part of the database's own work. A
-- domain's rules are read once per connection and kept, and are checked only where a value is
-- written to the column: the hot path's updates, which never write the bounded columns, skip
-- them. Every rule of 0001 and 0003 holds as before, still refused with SQLSTATE 23514.

CREATE DOMAIN pgq.task_name AS text CHECK (length(VALUE) BETWEEN 1 AND 128);
CREATE DOMAIN pgq.queue_name AS text
    CHECK (VALUE ~ '^[A-Za-z0-9_.:-]+$' AND octet_length(VALUE) <= 64);
CREATE DOMAIN pgq.job_status AS text CHECK (VALUE IN
    ('pending', 'claimed', 'running', 'completed', 'failed', 'cancelled'));
CREATE DOMAIN pgq.priority AS smallint CHECK (VALUE BETWEEN 0 AND 1000);
CREATE DOMAIN pgq.attempt_count AS integer CHECK (VALUE >= 0);
CREATE DOMAIN pgq.max_attempts AS integer CHECK (VALUE BETWEEN 1 AND 1000);
CREATE DOMAIN pgq.unique_key AS text CHECK (octet_length(VALUE) BETWEEN 1 AND 1024);
CREATE DOMAIN pgq.error_message AS text CHECK (octet_length(VALUE) <= 8192);
CREATE DOMAIN pgq.error_history AS jsonb CHECK (jsonb_typeof(VALUE) = 'array');
CREATE DOMAIN pgq.percent AS smallint CHECK (VALUE BETWEEN 0 AND 100);
CREATE DOMAIN pgq.stage AS text CHECK (octet_length(VALUE) <= 1024);
CREATE DOMAIN pgq.event_count AS integer CHECK (VALUE >= 0);

-- `phase` becomes a plain column that every status change writes along with the status, and
-- the transition guards check that the two agree: PostgreSQL re-reads a generated column's
-- expression for every statement that writes the table and computes it for every row written,
-- whichever columns change. `pgq.phase_of(status)` gives the phase for hand-written SQL.
CREATE FUNCTION pgq.phase_of(status text) RETURNS smallint
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (CASE status WHEN 'pending' THEN 0 WHEN 'claimed' THEN 1 WHEN 'running' THEN 1
                        ELSE 2 END)::smallint
$$;

-- A column's type cannot change under a generated column or a trigger condition that reads it:
-- both go, with the indexes on `phase`, and come back after the rewrite.
DROP TRIGGER jobs_bounds ON pgq.jobs;
DROP FUNCTION pgq.refuse_out_of_bounds();
DROP TRIGGER jobs_guard_insert ON pgq.jobs;
DROP TRIGGER jobs_guard_update ON pgq.jobs;
DROP INDEX pgq.jobs_claim_idx;
DROP INDEX pgq.jobs_unique_key_idx;
DROP INDEX pgq.jobs_lease_idx;
DROP INDEX pgq.jobs_finished_idx;
ALTER TABLE pgq.jobs
    DROP CONSTRAINT jobs_status_check,
    DROP CONSTRAINT jobs_attempts_check,
    DROP CONSTRAINT jobs_progress_check,
    DROP CONSTRAINT jobs_check,
    DROP COLUMN phase;

ALTER TABLE pgq.jobs
    ALTER COLUMN task TYPE pgq.task_name,
    ALTER COLUMN queue TYPE pgq.queue_name,
    ALTER COLUMN status TYPE pgq.job_status,
    ALTER COLUMN priority TYPE pgq.priority,
    ALTER COLUMN attempts TYPE pgq.attempt_count,
    ALTER COLUMN max_attempts TYPE pgq.max_attempts,
    ALTER COLUMN unique_key TYPE pgq.unique_key,
    ALTER COLUMN last_error TYPE pgq.error_message,
    ALTER COLUMN errors TYPE pgq.error_history,
    ALTER COLUMN progress TYPE pgq.percent,
    ALTER COLUMN current_stage TYPE pgq.stage,
    ALTER COLUMN events_count TYPE pgq.event_count,
    ADD COLUMN phase smallint NOT NULL GENERATED ALWAYS AS (pgq.phase_of(status)) STORED,
    -- A job held by a worker always says by whom and until when.
    ADD CONSTRAINT jobs_held_check CHECK (phase <> 1
        OR (worker_id IS NOT NULL AND claimed_at IS NOT NULL AND lease_expires_at IS NOT NULL));
ALTER TABLE pgq.jobs ALTER COLUMN phase DROP EXPRESSION;
ALTER TABLE pgq.jobs ALTER COLUMN phase SET DEFAULT 0;
COMMENT ON COLUMN pgq.jobs.phase IS
    '0 pending, 1 held (claimed or running), 2 finished: pgq.phase_of(status), written with it';

CREATE INDEX jobs_claim_idx ON pgq.jobs (queue, priority DESC, run_at, id) WHERE phase = 0;
CREATE UNIQUE INDEX jobs_unique_key_idx ON pgq.jobs (task, unique_key)
    WHERE unique_key IS NOT NULL AND phase < 2;
CREATE INDEX jobs_lease_idx ON pgq.jobs (lease_expires_at) WHERE phase = 1;
CREATE INDEX jobs_finished_idx ON pgq.jobs (completed_at) WHERE phase = 2;

-- Runs only to refuse (the triggers' WHEN clauses hold the rules), and says why.
CREATE OR REPLACE FUNCTION pgq.guard_transition() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' AND NEW.status <> 'pending' THEN
        RAISE EXCEPTION 'pgq: a job is inserted as pending, not %', NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    IF NEW.phase IS DISTINCT FROM pgq.phase_of(NEW.status) THEN
        RAISE EXCEPTION 'pgq: job % is % with phase %, not %',
                NEW.id, NEW.status, NEW.phase, pgq.phase_of(NEW.status)
            USING ERRCODE = 'check_violation',
                  HINT = 'Write the phase with the status: phase = pgq.phase_of(status).';
    END IF;
    RAISE EXCEPTION 'pgq: job % cannot move from % to %', OLD.id, OLD.status, NEW.status
        USING ERRCODE = 'check_violation';
END
$$;

CREATE TRIGGER jobs_guard_insert BEFORE INSERT ON pgq.jobs
    FOR EACH ROW WHEN (NEW.status <> 'pending' OR NEW.phase <> 0)
    EXECUTE FUNCTION pgq.guard_transition();

-- The allowed moves as one array of 'old>new' pairs with the new phase, same-state updates of
-- active jobs included. PostgreSQL re-reads a trigger's WHEN clause for every statement: the
-- row-list form of 0003 is stored as 15 kB of expression text, this one as 2 kB.
CREATE TRIGGER jobs_guard_update AFTER UPDATE ON pgq.jobs
    FOR EACH ROW WHEN ((OLD.status || '>' || NEW.status || NEW.phase::text) <> ALL ('{
        pending>claimed1, claimed>running1, running>completed2,
        claimed>claimed1, running>running1, pending>pending0,
        pending>cancelled2, claimed>pending0, claimed>failed2, claimed>cancelled2,
        running>failed2, running>cancelled2, running>pending0,
        failed>pending0, cancelled>pending0}'::text[]))
    EXECUTE FUNCTION pgq.guard_transition();
