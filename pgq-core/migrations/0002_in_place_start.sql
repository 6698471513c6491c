-- Starting a claimed job rewrites its row in place. PostgreSQL can do that (a HOT update: no new
-- index entries, the old version pruned on the page) only when no indexed column changes, and
-- the columns in a partial index's predicate count. The predicates therefore move from `status`
-- to `phase`, which `claimed` and `running` share; the claim sets the task's own lease, so that
-- `claimed → running` changes no indexed column at all. Pages keep room for those updates.

ALTER TABLE pgq.jobs ADD COLUMN phase smallint NOT NULL GENERATED ALWAYS AS (
    CASE WHEN status = 'pending' THEN 0
         WHEN status IN ('claimed', 'running') THEN 1
         ELSE 2 END) STORED;
COMMENT ON COLUMN pgq.jobs.phase IS '0 pending, 1 held (claimed or running), 2 finished';

ALTER TABLE pgq.jobs SET (fillfactor = 80);

DROP INDEX pgq.jobs_claim_idx;
DROP INDEX pgq.jobs_unique_key_idx;
DROP INDEX pgq.jobs_lease_idx;
DROP INDEX pgq.jobs_finished_idx;

-- Claiming: pending jobs of one queue, highest priority first, then oldest run_at, then id.
CREATE INDEX jobs_claim_idx ON pgq.jobs (queue, priority DESC, run_at, id) WHERE phase = 0;

-- At most one active (pending, claimed or running) job per (task, unique_key).
CREATE UNIQUE INDEX jobs_unique_key_idx ON pgq.jobs (task, unique_key)
    WHERE unique_key IS NOT NULL AND phase < 2;

-- Rescue: held jobs whose lease ran out.
CREATE INDEX jobs_lease_idx ON pgq.jobs (lease_expires_at) WHERE phase = 1;

-- Retention: finished jobs by age.
CREATE INDEX jobs_finished_idx ON pgq.jobs (completed_at) WHERE phase = 2;

-- The state machine's allowed moves, checked in the trigger's WHEN clause: the function (which
-- refuses the move) runs only for a move that is not allowed, so the legal updates of every
-- claim, start and completion cost no PL/pgSQL call.
DROP TRIGGER jobs_guard_update ON pgq.jobs;
CREATE TRIGGER jobs_guard_update BEFORE UPDATE ON pgq.jobs
    FOR EACH ROW WHEN (NOT (
        (OLD.status = NEW.status AND OLD.status IN ('pending', 'claimed', 'running'))
        OR (OLD.status, NEW.status) IN (
            ('pending', 'claimed'), ('pending', 'cancelled'),
            ('claimed', 'running'), ('claimed', 'pending'), ('claimed', 'failed'),
            ('claimed', 'cancelled'),
            ('running', 'completed'), ('running', 'failed'), ('running', 'cancelled'),
            ('running', 'pending'),
            ('failed', 'pending'), ('cancelled', 'pending'))))
    EXECUTE FUNCTION pgq.guard_transition();
