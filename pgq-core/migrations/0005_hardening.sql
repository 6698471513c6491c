-- What another role or a hand-written row can do to pgq, refused by the schema.
--
-- pgq's functions resolve names in pg_catalog and their own schema only, whatever the caller's
-- search_path: a look-alike function or operator someone else created never runs inside them.
-- pgq applies its migrations with `search_path = pg_catalog, <schema>`, which these keep.
ALTER FUNCTION pgq.default_backoff(integer) SET search_path FROM CURRENT;
ALTER FUNCTION pgq.append_error(jsonb, integer, text, bigint) SET search_path FROM CURRENT;
ALTER FUNCTION pgq.guard_transition() SET search_path FROM CURRENT;
ALTER FUNCTION pgq.phase_of(text) SET search_path FROM CURRENT;

-- A row that pgq's statements cannot process would stop its whole queue: an attempt count the
-- claim cannot add one to, a run time outside what clients can read back, a worker id longer
-- than an error message can quote. Active rows out of range are ended or brought in range;
-- the new rules hold for every value written from now on (NOT VALID: finished rows, which no
-- statement reads that way, are left as they are).
UPDATE pgq.jobs
SET status = 'cancelled', phase = 2, completed_at = now(), lease_expires_at = NULL,
    last_error = 'pgq: attempts out of range (' || attempts || '); cancelled by migration 0005',
    updated_at = now()
WHERE phase < 2 AND attempts > 100000;
ALTER DOMAIN pgq.attempt_count ADD CONSTRAINT attempt_count_range
    CHECK (VALUE <= 100000) NOT VALID;

CREATE DOMAIN pgq.run_time AS timestamptz;
UPDATE pgq.jobs
SET run_at = greatest(least(run_at, '9999-12-31 00:00:00+00'), '1970-01-01 00:00:00+00'),
    updated_at = now()
WHERE phase < 2
  AND NOT (run_at >= '1970-01-01 00:00:00+00' AND run_at < '10000-01-01 00:00:00+00');
ALTER TABLE pgq.jobs ALTER COLUMN run_at TYPE pgq.run_time;
ALTER DOMAIN pgq.run_time ADD CONSTRAINT run_time_range
    CHECK (VALUE >= '1970-01-01 00:00:00+00' AND VALUE < '10000-01-01 00:00:00+00') NOT VALID;

CREATE DOMAIN pgq.worker_name AS text;
UPDATE pgq.jobs SET worker_id = left(worker_id, 128), updated_at = now()
WHERE phase = 1 AND octet_length(worker_id) > 128;
ALTER TABLE pgq.jobs ALTER COLUMN worker_id TYPE pgq.worker_name;
ALTER DOMAIN pgq.worker_name ADD CONSTRAINT worker_name_length
    CHECK (octet_length(VALUE) BETWEEN 1 AND 128) NOT VALID;
