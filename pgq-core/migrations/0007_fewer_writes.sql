-- Two moves that save a row version per job, so that a job costs the database two writes, its
-- claim and its completion, as the plainest queue does:
--
-- * pending -> running: a job whose handler starts in the round trip that claims it is claimed
--   as running. Only jobs claimed ahead of a free slot pass through `claimed`.
-- * claimed -> completed: a job claimed ahead of a free slot whose handler started and finished
--   before its start was written is completed from `claimed`, its start (`started_at`) written
--   with its completion. Without that start, the move is refused: a job completes only once it
--   has started.
DROP TRIGGER jobs_guard_update ON pgq.jobs;
CREATE TRIGGER jobs_guard_update AFTER UPDATE ON pgq.jobs
    FOR EACH ROW WHEN ((OLD.status || '>' || NEW.status || NEW.phase::text) <> ALL ('{
        pending>claimed1, pending>running1, claimed>running1, running>completed2,
        claimed>completed2, claimed>claimed1, running>running1, pending>pending0,
        pending>cancelled2, claimed>pending0, claimed>failed2, claimed>cancelled2,
        running>failed2, running>cancelled2, running>pending0,
        failed>pending0, cancelled>pending0}'::text[])
        OR (OLD.status = 'claimed' AND NEW.status = 'completed'
            AND NOT coalesce(NEW.started_at >= NEW.claimed_at, false)))
    EXECUTE FUNCTION pgq.guard_transition();

-- Says why, for the one move that is allowed only with its start.
CREATE OR REPLACE FUNCTION pgq.guard_transition() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
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
    IF OLD.status = 'claimed' AND NEW.status = 'completed' THEN
        RAISE EXCEPTION 'pgq: job % cannot complete from claimed without its start', OLD.id
            USING ERRCODE = 'check_violation',
                  HINT = 'A job completes once it has started: set started_at (at or after claimed_at) with the completion.';
    END IF;
    RAISE EXCEPTION 'pgq: job % cannot move from % to %', OLD.id, OLD.status, NEW.status
        USING ERRCODE = 'check_violation';
END
$$;
