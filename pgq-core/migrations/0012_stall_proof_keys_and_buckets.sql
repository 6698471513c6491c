-- Two more values that hand-written SQL could store and that stopped a queue's claims.

-- A concurrency key longer than an index entry can hold (about 2.7 kB) was stored, then refused
-- by the held jobs' key index when the job was claimed, which failed every claim of its queue.
-- Keys are bounded now as pgq's client bounds them (1 kB, `limits::MAX_CONCURRENCY_KEY_BYTES`).
-- An active job's longer key becomes its digest, which the jobs that shared the key still
-- share; the rule holds for every value written from now on (NOT VALID: finished rows, which no
-- claim reads, are left as they are). As for the other domain-typed columns, a job without a
-- key takes a default the plan holds as a constant (0011), so plain inserts check nothing more.
CREATE DOMAIN pgq.concurrency_key AS text;
UPDATE pgq.jobs SET concurrency_key = 'md5:' || md5(concurrency_key), updated_at = now()
WHERE phase < 2 AND octet_length(concurrency_key) > 1024;
ALTER TABLE pgq.jobs ALTER COLUMN concurrency_key TYPE pgq.concurrency_key;
ALTER DOMAIN pgq.concurrency_key ADD CONSTRAINT concurrency_key_length
    CHECK (octet_length(VALUE) BETWEEN 1 AND 1024) NOT VALID;
CREATE FUNCTION pgq.no_concurrency_key() RETURNS pgq.concurrency_key
LANGUAGE sql IMMUTABLE PARALLEL SAFE SET search_path FROM CURRENT AS $$ SELECT NULL::text $$;
ALTER TABLE pgq.jobs ALTER COLUMN concurrency_key SET DEFAULT pgq.no_concurrency_key();

-- A rate-limited queue's token bucket, written by hand as an infinite time, an infinite or
-- huge negative count, or a period beyond pgq's day, made `pgq.claimable` fail ("cannot
-- subtract infinite timestamps", "bigint out of range") at every claim. Now any stored bucket
-- reads within its bounds: its tokens between none and the limit (NaN reads as full), no time
-- passed since an infinite or future refill, and a wait of at most a day. The queue's row gets
-- the bucket back in range at the next claim. As before otherwise (0010).
CREATE OR REPLACE FUNCTION pgq.claimable(queue_name text, completing bigint[], worker text,
                                         asked bigint, tasks text[], OUT room bigint,
                                         OUT wait_ms bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    rate integer;
    period bigint;
    bucket double precision;
    filled_at timestamptz;
    due bigint;
    refilled timestamptz;
    passed_ms double precision := 0;
BEGIN
    IF asked <= 0 THEN
        RETURN;
    END IF;
    SELECT q.rate_limit, q.rate_period_ms, q.tokens, q.tokens_at
    INTO rate, period, bucket, filled_at
    FROM pgq.queues AS q WHERE q.name = queue_name AND q.rate_limit IS NOT NULL FOR UPDATE;
    IF rate IS NULL THEN
        RETURN;
    END IF;
    refilled := clock_timestamp();
    IF isfinite(filled_at) AND filled_at < refilled THEN
        passed_ms := extract(epoch FROM (refilled - filled_at)) * 1000;
    END IF;
    bucket := greatest(0, least(rate::double precision, coalesce(bucket, rate)));
    bucket := least(rate::double precision, bucket + passed_ms * rate / period);
    IF bucket >= 1 THEN
        SELECT count(*) INTO due FROM (
            SELECT 1 FROM pgq.jobs AS j
            WHERE j.phase = 0 AND j.queue = queue_name AND j.run_at <= now()
              AND j.task = ANY (tasks)
            LIMIT least(asked, floor(bucket)::bigint)
        ) AS d;
        room := due;
    ELSE
        room := 0;
    END IF;
    bucket := bucket - room;
    UPDATE pgq.queues SET tokens = bucket, tokens_at = refilled WHERE name = queue_name;
    IF room < asked AND bucket < 1 THEN
        wait_ms := ceil(least((1 - bucket) * period / rate, 86400000))::bigint;
    END IF;
END $$;
