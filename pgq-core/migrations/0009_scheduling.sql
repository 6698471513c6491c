-- Scheduling: periodic tasks (one leader per set of schedules enqueues each instant exactly once),
-- cluster-wide concurrency limits per queue and per concurrency key.

-- Leadership by lease, not by a session advisory lock, so that it works behind a transaction
-- pooler: a process leads `role` while `expires_at` is ahead of the database clock, renews
-- it well before then, and any other process takes the row over once it has passed.
CREATE TABLE pgq.leaders (
    role       text            PRIMARY KEY CHECK (length(role) BETWEEN 1 AND 128),
    holder     pgq.worker_name NOT NULL,
    elected_at timestamptz     NOT NULL DEFAULT now(),
    expires_at timestamptz     NOT NULL
);
COMMENT ON COLUMN pgq.leaders.expires_at IS
    'when another process may take the lead unless the holder renews it first';

-- One row per schedule. `done_through` is the watermark that makes each instant enqueue once:
-- every instant up to it was enqueued or passed over by the schedule's policy. It moves only
-- forward, by a compare-and-set in the transaction that inserts the instants' jobs, so two
-- leaders (a lease taken over, a deploy that changes the schedule set) never enqueue one
-- instant twice, finished jobs included.
CREATE TABLE pgq.schedules (
    name         text          PRIMARY KEY CHECK (length(name) BETWEEN 1 AND 128),
    task         pgq.task_name NOT NULL,
    cron         text          NOT NULL CHECK (length(cron) BETWEEN 1 AND 256),
    time_zone    text          NOT NULL CHECK (length(time_zone) BETWEEN 1 AND 64),
    missed       text          NOT NULL CHECK (length(missed) BETWEEN 1 AND 32),
    role         text          NOT NULL,
    done_through timestamptz   NOT NULL,
    last_instant timestamptz,
    last_job_id  bigint,
    updated_at   timestamptz   NOT NULL DEFAULT now()
);
COMMENT ON COLUMN pgq.schedules.done_through IS
    'every instant up to here was enqueued or passed over; moves only forward';
COMMENT ON COLUMN pgq.schedules.role IS 'the leader role (pgq.leaders) whose holder runs it';

-- A cluster-wide concurrency limit per queue, set by operators: at most this many of the
-- queue's jobs held (claimed or running) across all workers; NULL for none.
ALTER TABLE pgq.queues ADD COLUMN concurrency_limit integer CHECK (concurrency_limit >= 1);
COMMENT ON COLUMN pgq.queues.concurrency_limit IS
    'at most this many jobs of the queue claimed or running across all workers; NULL: no limit';

-- A cluster-wide rate limit per queue, set by operators: at most `rate_limit` job starts per
-- `rate_period_ms`, across all workers. A token bucket in the row: `tokens` (at most
-- `rate_limit`) as of `tokens_at`, refilled by the time elapsed and taken by each claim.
ALTER TABLE pgq.queues
    ADD COLUMN rate_limit integer CHECK (rate_limit >= 1),
    ADD COLUMN rate_period_ms bigint CHECK (rate_period_ms >= 1),
    ADD COLUMN tokens double precision,
    ADD COLUMN tokens_at timestamptz,
    ADD CONSTRAINT queues_rate_check CHECK ((rate_limit IS NULL) = (rate_period_ms IS NULL));
COMMENT ON COLUMN pgq.queues.rate_limit IS
    'at most this many job starts per rate_period_ms across all workers; NULL: no rate limit';

-- What a claim of a limited or rate-limited queue may take now: `room` (NULL when the queue has
-- neither limit), and when it took less than it asked for want of tokens, `wait_ms` until the
-- next one. Called by the claim statement, it locks the queue's row until that statement's
-- transaction ends, so that the claimers of a limited queue take turns. The count of held jobs
-- is a query of its own, so under READ COMMITTED it takes a snapshot after the lock was granted
-- and sees every claim committed by the claimer before; counted in the locking statement, it
-- would see the snapshot taken before the wait. `completing`: jobs this claim's statement
-- completes (held by `worker`), which no longer count. Tokens are taken only for jobs that are
-- due (`tasks`: those the worker runs), so that a claim of a nearly empty queue wastes none.
CREATE FUNCTION pgq.claimable(queue_name text, completing bigint[], worker text, asked bigint,
                              tasks text[], OUT room bigint, OUT wait_ms bigint)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
    most integer;
    rate integer;
    period bigint;
    bucket double precision;
    filled_at timestamptz;
    held bigint;
    due bigint;
    refilled timestamptz;
BEGIN
    IF asked <= 0 THEN
        -- Nothing to claim: nothing to count, and no turn to take.
        RETURN;
    END IF;
    SELECT q.concurrency_limit, q.rate_limit, q.rate_period_ms, q.tokens, q.tokens_at
    INTO most, rate, period, bucket, filled_at
    FROM pgq.queues AS q WHERE q.name = queue_name FOR UPDATE;
    IF most IS NULL AND rate IS NULL THEN
        RETURN;
    END IF;
    room := greatest(asked, 0);
    IF most IS NOT NULL THEN
        SELECT count(*) INTO held FROM pgq.jobs AS j
        WHERE j.phase = 1 AND j.queue = queue_name
          AND NOT (j.id = ANY (completing) AND j.worker_id = worker);
        room := least(room, greatest(most - held, 0));
    END IF;
    IF rate IS NOT NULL THEN
        refilled := clock_timestamp();
        bucket := least(rate::double precision,
                        coalesce(bucket, rate)
                        + (extract(epoch FROM (refilled - coalesce(filled_at, refilled))) * 1000 * rate / period));
        IF room > 0 AND bucket >= 1 THEN
            SELECT count(*) INTO due FROM (
                SELECT 1 FROM pgq.jobs AS j
                WHERE j.phase = 0 AND j.queue = queue_name AND j.run_at <= now()
                  AND j.task = ANY (tasks)
                LIMIT least(room, floor(bucket)::bigint)
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
    END IF;
END $$;

-- A concurrency limit per key: at most `concurrency_limit` held jobs of the queue with this
-- `concurrency_key` (`#[task(concurrency_key = "{customer_id}", concurrency = 1)]`), stored at
-- enqueue; NULL for a task without one. No CHECK or trigger: every update checks the table's
-- constraints, and the claim reads a hand-written limit below 1 (or a key without a limit) as 1,
-- so no value can wedge a queue.
ALTER TABLE pgq.jobs
    ADD COLUMN concurrency_key text,
    ADD COLUMN concurrency_limit integer;
COMMENT ON COLUMN pgq.jobs.concurrency_key IS
    'at most concurrency_limit held jobs of the queue with this key; NULL: no such limit';

-- The held jobs of each key, counted by every claim of a queue with keyed tasks.
CREATE INDEX jobs_concurrency_key_idx ON pgq.jobs (queue, concurrency_key)
    WHERE phase = 1 AND concurrency_key IS NOT NULL;

-- The jobs a claim of a queue with keyed tasks may take, best first: at most `asked`, and of
-- each key no more than its limit leaves beside the key's held jobs. Called by the claim
-- statement after `pgq.claimable`, it locks the queue's row (creating it if need be) so that
-- such claims take turns; its query then takes a snapshot after the lock was granted and counts
-- every claim committed before, as `pgq.claimable` does. Keys at their limit are left out of
-- the candidates, and the others are ranked within their key over a window larger than the
-- claim, so that a hot key's backlog neither fills the claim nor hides the other keys.
-- `completing`: jobs this claim's statement completes (held by `worker`), which no longer count.
-- One more row, with no id and `held_back`, says that a key's limit kept jobs waiting (or that a
-- key is at its limit): the worker then claims again as its own jobs finish.
CREATE FUNCTION pgq.claimable_keyed(queue_name text, completing bigint[], worker text,
                                    asked bigint, tasks text[])
RETURNS TABLE (id bigint, held_back boolean)
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF asked <= 0 THEN
        RETURN;
    END IF;
    PERFORM 1 FROM pgq.queues AS q WHERE q.name = queue_name FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO pgq.queues (name) VALUES (queue_name) ON CONFLICT (name) DO NOTHING;
        PERFORM 1 FROM pgq.queues AS q WHERE q.name = queue_name FOR UPDATE;
    END IF;
    RETURN QUERY
    WITH held AS (
        SELECT j.concurrency_key AS key, count(*) AS n,
               greatest(min(coalesce(j.concurrency_limit, 1)), 1) AS most
        FROM pgq.jobs AS j
        WHERE j.phase = 1 AND j.queue = queue_name AND j.concurrency_key IS NOT NULL
          AND NOT (j.id = ANY (completing) AND j.worker_id = worker)
        GROUP BY j.concurrency_key
    ),
    candidates AS (
        SELECT j.id, j.priority, j.run_at, j.concurrency_key AS key,
               greatest(coalesce(j.concurrency_limit, 1), 1) AS most
        FROM pgq.jobs AS j
        WHERE j.phase = 0 AND j.queue = queue_name AND j.run_at <= now()
          AND j.task = ANY (tasks)
          AND NOT EXISTS (SELECT 1 FROM held AS f
                          WHERE f.key = j.concurrency_key AND f.n >= f.most)
        ORDER BY j.priority DESC, j.run_at, j.id
        LIMIT (4 * greatest(asked, 0)) + 32
    ),
    ranked AS (
        SELECT c.id, c.priority, c.run_at, c.key, c.most,
               row_number() OVER (PARTITION BY c.key ORDER BY c.priority DESC, c.run_at, c.id)
                   AS nth
        FROM candidates AS c
    )
    SELECT p.id, false FROM (
        SELECT r.id FROM ranked AS r LEFT JOIN held AS h ON h.key = r.key
        WHERE r.key IS NULL OR (r.nth <= (r.most - coalesce(h.n, 0)))
        ORDER BY r.priority DESC, r.run_at, r.id
        LIMIT greatest(asked, 0)
    ) AS p
    UNION ALL
    SELECT NULL, true
    WHERE EXISTS (SELECT 1 FROM held AS f WHERE f.n >= f.most)
       OR EXISTS (SELECT 1 FROM ranked AS r LEFT JOIN held AS h ON h.key = r.key
                  WHERE r.nth > (r.most - coalesce(h.n, 0)));
END $$;
