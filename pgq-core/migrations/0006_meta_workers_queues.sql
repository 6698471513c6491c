-- What operators and their tools read and steer: a job's metadata, the live workers, and the
-- settings of each queue.

-- A job's metadata: user tags and values, and the trace context of the enqueue that made it.
-- A JSON object of at most 4 KiB; NULL when there is none, so that plain enqueues pay nothing.
CREATE DOMAIN pgq.job_meta AS jsonb
    CHECK (jsonb_typeof(VALUE) = 'object' AND octet_length(VALUE::text) <= 4096);
ALTER TABLE pgq.jobs ADD COLUMN meta pgq.job_meta;
COMMENT ON COLUMN pgq.jobs.meta IS
    'user tags and values, and the enqueue''s trace context (traceparent): a JSON object';

-- Tags are found by containment: meta @> '{"tags": {"tenant": "acme"}}'.
CREATE INDEX jobs_meta_idx ON pgq.jobs USING gin (meta jsonb_path_ops) WHERE meta IS NOT NULL;

-- Every worker process registers itself and heartbeats; a clean shutdown removes its row. A row
-- whose heartbeat is too old belongs to a dead worker, whose jobs any other worker releases.
CREATE TABLE pgq.workers (
    id           pgq.worker_name PRIMARY KEY,
    host         text            NOT NULL,
    pid          integer         NOT NULL,
    queues       jsonb           NOT NULL,
    started_at   timestamptz     NOT NULL DEFAULT now(),
    heartbeat_at timestamptz     NOT NULL DEFAULT now(),
    held         integer         NOT NULL DEFAULT 0
);
COMMENT ON COLUMN pgq.workers.queues IS 'each queue the worker serves, with its concurrency';

-- Settings a queue keeps across deploys and restarts, set by operators: paused or not.
CREATE TABLE pgq.queues (
    name       pgq.queue_name PRIMARY KEY,
    paused_at  timestamptz,
    updated_at timestamptz    NOT NULL DEFAULT now()
);
COMMENT ON COLUMN pgq.queues.paused_at IS 'when the queue was paused; NULL while it runs';
