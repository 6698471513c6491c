-- A rate-limited queue's claim takes its tokens before it knows how many jobs it will get:
-- `pgq.claimable` counts the due jobs, but the claim then passes over those another transaction
-- holds locked (`SKIP LOCKED`), and with keyed tasks over those whose key is at its limit. The
-- tokens of those jobs were spent all the same, so a hot key's backlog drained the bucket and
-- kept the queue's other jobs waiting for tokens that nothing used. The claim statement now
-- gives back, in the same transaction, what it took beyond the jobs it claimed. The queue's row
-- is still locked by `pgq.claimable`, so no other claim saw the tokens gone.
CREATE FUNCTION pgq.return_tokens(queue_name text, unused bigint) RETURNS bigint
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF unused > 0 THEN
        UPDATE pgq.queues AS q
        SET tokens = least(q.rate_limit::double precision, q.tokens + unused)
        WHERE q.name = queue_name AND q.rate_limit IS NOT NULL AND q.tokens IS NOT NULL;
    END IF;
    RETURN greatest(unused, 0);
END $$;
