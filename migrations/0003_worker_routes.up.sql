-- Which routes each live worker process runs on each queue it works. A
-- worker refuses to start when a live worker on one of its queues runs
-- different routes there: both would take the queue's events, and each would
-- settle events the other has the handlers for. A row lives while its worker
-- renews expires_at (a heartbeat); a worker deletes its rows when it stops.
-- Owned by pkg/worker (registration.go).
CREATE TABLE hookinbox_worker_routes (
    worker_id  text        NOT NULL,
    queue      text        NOT NULL,
    -- The worker's routes for this queue, in one canonical line.
    routes     text        NOT NULL,
    host       text        NOT NULL,
    pid        integer     NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (queue, worker_id)
);
