-- A queue's concurrency limit, shared out as seats: each worker that runs a limited queue leases
-- some of the limit (its seats) and runs at most that many of the queue's handlers at once. The
-- seats of all live leases never add up to more than the limit, so the handlers running across
-- all workers never do either; the claims themselves take no turns and count nothing, and a
-- worker claims ahead of its free seats as it does on any queue (jobs claimed ahead do not run,
-- so they take no seat).
CREATE TABLE pgq.queue_seats (
    queue      pgq.queue_name  NOT NULL,
    worker_id  pgq.worker_name NOT NULL,
    seats      integer         NOT NULL CHECK (seats >= 0),
    wanted     integer         NOT NULL CHECK (wanted >= 0),
    expires_at timestamptz     NOT NULL,
    PRIMARY KEY (queue, worker_id)
);
COMMENT ON TABLE pgq.queue_seats IS
    'each worker''s share of its queues'' concurrency limits, leased until expires_at';
COMMENT ON COLUMN pgq.queue_seats.seats IS
    'at most this many of the queue''s handlers run at once on the worker';

-- Leases seats of `queue_name`'s limit to `worker` for `lease_ms`. `allowed`: how many of the
-- queue's handlers the worker may run from now on, up to `wanted`, out of what the other live
-- leases leave; while another live worker has fewer seats than it wants, no more than the fair
-- share (the limit over the workers that want seats, rounded up). `seats`, what the lease
-- records, also covers `keep`: what the worker may still be running (never more than it was
-- allowed before), so that seats given back are free only once their handlers have returned.
-- Both NULL: the queue has no limit, and the worker's lease is dropped. Takes the queue's row
-- lock, so that the calls for one queue take turns; the leases are read in a query of their own,
-- whose snapshot, taken after the lock was granted, sees every lease committed before.
CREATE FUNCTION pgq.take_seats(queue_name text, worker text, wanted integer, keep integer,
                               lease_ms bigint, OUT seats integer, OUT allowed integer)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    most integer;
    others bigint;
    wanting bigint;
    short boolean;
BEGIN
    SELECT q.concurrency_limit INTO most FROM pgq.queues AS q
    WHERE q.name = queue_name FOR UPDATE;
    IF most IS NULL THEN
        DELETE FROM pgq.queue_seats AS s WHERE s.queue = queue_name AND s.worker_id = worker;
        RETURN;
    END IF;
    SELECT coalesce(sum(s.seats), 0), count(*) FILTER (WHERE s.wanted > 0),
           coalesce(bool_or(s.wanted > s.seats), false)
    INTO others, wanting, short
    FROM pgq.queue_seats AS s
    WHERE s.queue = queue_name AND s.worker_id <> worker AND s.expires_at > now();
    allowed := greatest(least(wanted, most - others), 0);
    IF short AND wanted > 0 THEN
        allowed := least(allowed, ceil(most::numeric / (wanting + 1))::integer);
    END IF;
    seats := greatest(allowed, keep, 0);
    INSERT INTO pgq.queue_seats AS s (queue, worker_id, seats, wanted, expires_at)
    VALUES (queue_name, worker, seats, greatest(wanted, 0),
            now() + lease_ms * interval '1 millisecond')
    ON CONFLICT (queue, worker_id) DO UPDATE
    SET seats = EXCLUDED.seats, wanted = EXCLUDED.wanted, expires_at = EXCLUDED.expires_at;
    -- Leases of workers gone for good, whose seats no longer count.
    DELETE FROM pgq.queue_seats AS s
    WHERE s.queue = queue_name AND s.expires_at < now() - interval '1 hour';
END $$;

-- What a claim of a rate-limited queue may take now: `room` (NULL when the queue has no rate
-- limit), and when it took less than it asked for want of tokens, `wait_ms` until the next one.
-- As before, but for the concurrency limit, which seats enforce now: a claim no longer counts
-- the queue's held jobs. Called by the claim statement, it locks the queue's row until that
-- statement's transaction ends, so that the claimers of a rate-limited queue take turns. Tokens
-- are taken only for jobs that are due (`tasks`: those the worker runs), so that a claim of a
-- nearly empty queue wastes none. `completing` and `worker` are no longer read.
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
    bucket := least(rate::double precision,
                    coalesce(bucket, rate)
                    + (extract(epoch FROM (refilled - coalesce(filled_at, refilled))) * 1000 * rate / period));
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
        wait_ms := ceil((1 - bucket) * period / rate)::bigint;
    END IF;
END $$;

COMMENT ON COLUMN pgq.queues.concurrency_limit IS
    'at most this many of the queue''s handlers running at once across all workers (pgq.queue_seats); NULL: no limit';
COMMENT ON COLUMN pgq.queues.rate_limit IS
    'at most this many job starts per rate_period_ms across all workers; NULL: no rate limit';
