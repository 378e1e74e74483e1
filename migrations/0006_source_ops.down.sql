DROP INDEX IF EXISTS webhook_inbox_held_idx;
DROP TABLE IF EXISTS hookinbox_rejection;
DROP TABLE IF EXISTS hookinbox_source_pause;
