DROP INDEX IF EXISTS webhook_inbox_source_twin_key_key;
ALTER TABLE webhook_inbox DROP COLUMN IF EXISTS twin_key;
