-- A worker's registration is a lease of its own: each heartbeat moves `expires_at` forward by
-- what the worker chose, and a row past it belongs to a dead worker, whose held jobs any other
-- worker's rescuer takes back at once instead of waiting for each job's lease.
ALTER TABLE pgq.workers ADD COLUMN expires_at timestamptz NOT NULL DEFAULT now();
COMMENT ON COLUMN pgq.workers.expires_at IS
    'when the worker counts as dead unless it heartbeats again';
