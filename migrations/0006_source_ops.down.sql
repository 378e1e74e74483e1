DROP INDEX IF EXISTS webhook_inbox_held_idx;
ALTER TABLE webhook_inbox DROP COLUMN IF EXISTS held_at;
DROP TABLE IF EXISTS hookinbox_rejection;
DROP TABLE IF EXISTS hookinbox_source_pause;
