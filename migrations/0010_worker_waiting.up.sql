-- A worker whose queue a live worker works with other routes records its own
-- routes as waiting, instead of exiting: the working one, seeing a newer route
-- set waiting (started_at later than its own), finishes the jobs it holds,
-- deletes its rows and works nothing more; the waiting one then takes over.
-- A queue is never worked by two route sets at once: only 'working' rows
-- work (issue 28). Owned by pkg/worker (registration.go).
ALTER TABLE hookinbox_worker_routes
    ADD COLUMN state text NOT NULL DEFAULT 'working' CHECK (state IN ('working', 'waiting'));
