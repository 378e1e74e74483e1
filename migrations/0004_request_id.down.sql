DROP INDEX IF EXISTS webhook_inbox_failed_idx;
ALTER TABLE webhook_inbox DROP COLUMN IF EXISTS request_id;
