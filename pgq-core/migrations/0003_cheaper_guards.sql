-- Every claim, start and completion updates a row, and PostgreSQL checks each updated row
-- against every CHECK constraint and row trigger of the table, whatever columns changed. The
-- guards below keep every rule they kept before, at a fraction of the cost per update.

-- Bounds on columns the hot path never writes move from CHECK constraints to a trigger that
-- runs only when one of those columns is written (an insert, a replace, a failure, progress).
-- Its WHEN clause holds the rules, so the function runs only to refuse, and a NULL passes as
-- it did under CHECK. The queue rule loses its bounded repetition ({1,64}), which compiled to a
-- regular expression costing about 3 µs a row: an unbounded class plus a length is ten times
-- cheaper and means the same.
ALTER TABLE pgq.jobs
    DROP CONSTRAINT jobs_task_check,
    DROP CONSTRAINT jobs_queue_check,
    DROP CONSTRAINT jobs_priority_check,
    DROP CONSTRAINT jobs_max_attempts_check,
    DROP CONSTRAINT jobs_unique_key_check,
    DROP CONSTRAINT jobs_last_error_check,
    DROP CONSTRAINT jobs_errors_check,
    DROP CONSTRAINT jobs_current_stage_check,
    DROP CONSTRAINT jobs_events_count_check;

CREATE FUNCTION pgq.refuse_out_of_bounds() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pgq: job % has a value out of bounds', NEW.id
        USING ERRCODE = 'check_violation',
              DETAIL = 'task 1-128 characters; queue 1-64 of A-Z a-z 0-9 _ . : -; '
                       'priority 0-1000; max_attempts 1-1000; unique_key 1-1024 bytes; '
                       'last_error up to 8192 bytes; errors an array; '
                       'current_stage up to 1024 bytes; events_count not negative';
END
$$;

CREATE TRIGGER jobs_bounds AFTER INSERT OR UPDATE OF
        task, queue, priority, max_attempts, unique_key, last_error, errors, current_stage,
        events_count
    ON pgq.jobs
    FOR EACH ROW WHEN (NOT (
        length(NEW.task) BETWEEN 1 AND 128
        AND NEW.queue ~ '^[A-Za-z0-9_.:-]+$' AND octet_length(NEW.queue) <= 64
        AND NEW.priority BETWEEN 0 AND 1000
        AND NEW.max_attempts BETWEEN 1 AND 1000
        AND octet_length(NEW.unique_key) BETWEEN 1 AND 1024
        AND octet_length(NEW.last_error) <= 8192
        AND jsonb_typeof(NEW.errors) = 'array'
        AND octet_length(NEW.current_stage) <= 1024
        AND NEW.events_count >= 0))
    EXECUTE FUNCTION pgq.refuse_out_of_bounds();

-- A BEFORE ROW UPDATE trigger makes PostgreSQL lock each row before updating it: one more
-- write-ahead log record for every start and completion. An AFTER trigger with the same WHEN
-- clause sees the same old and new rows without that lock, and a refused move still aborts the
-- statement that tried it.
DROP TRIGGER jobs_guard_update ON pgq.jobs;
CREATE TRIGGER jobs_guard_update AFTER UPDATE ON pgq.jobs
    FOR EACH ROW WHEN (NOT (
        (OLD.status = NEW.status AND OLD.status IN ('pending', 'claimed', 'running'))
        OR (OLD.status, NEW.status) IN (
            ('pending', 'claimed'), ('claimed', 'running'), ('running', 'completed'),
            ('pending', 'cancelled'), ('claimed', 'pending'), ('claimed', 'failed'),
            ('claimed', 'cancelled'), ('running', 'failed'), ('running', 'cancelled'),
            ('running', 'pending'), ('failed', 'pending'), ('cancelled', 'pending'))))
    EXECUTE FUNCTION pgq.guard_transition();
