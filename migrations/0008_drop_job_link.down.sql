-- Put the link column back, pointing at each row's newest event job that
-- River still has.
ALTER TABLE webhook_inbox ADD COLUMN IF NOT EXISTS river_job_id bigint;
UPDATE webhook_inbox AS i SET river_job_id = j.id
FROM (SELECT DISTINCT ON ((args->>'inbox_id')::bigint) (args->>'inbox_id')::bigint AS inbox_id, id
      FROM river_job WHERE kind = 'hookinbox.event'
      ORDER BY (args->>'inbox_id')::bigint, id DESC) AS j
WHERE i.id = j.inbox_id;
DROP INDEX IF EXISTS river_job_inbox_id_idx;
