-- Tasks of one queue that format the same concurrency key share its slots, each job held to
-- its own limit: a job of limit 3 starts while fewer than 3 of the key are held, whatever the
-- limits of the jobs holding them. Before, a key's candidates were left out as soon as its
-- held jobs reached the smallest limit among them, so one running job of a limit-1 task kept
-- every job of a limit-3 task on the same key waiting. Only the candidates' filter changes.
CREATE OR REPLACE FUNCTION pgq.claimable_keyed(queue_name text, completing bigint[], worker text,
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
                          WHERE f.key = j.concurrency_key
                            AND f.n >= greatest(coalesce(j.concurrency_limit, 1), 1))
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
