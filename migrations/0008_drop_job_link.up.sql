-- The receiver no longer links each row to its River job with an UPDATE
-- after River's insert (about 37 % of its statement time, issue 11). The
-- link already exists the other way: every event job's args carry the
-- row's inbox_id. This index on River's table finds a row's jobs by it
-- (for the reaper, `inboxctl events` and lookups); River's own GIN index
-- on args would too, but at about 6x the cost per row. See docs/design.md.
ALTER TABLE webhook_inbox DROP COLUMN IF EXISTS river_job_id;
CREATE INDEX IF NOT EXISTS river_job_inbox_id_idx ON river_job (((args->>'inbox_id')::bigint))
    WHERE kind = 'hookinbox.event';
