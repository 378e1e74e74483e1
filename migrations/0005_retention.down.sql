DROP TABLE hookinbox_replay;
UPDATE webhook_inbox SET body = '' WHERE body IS NULL;
UPDATE webhook_inbox SET headers = '{}' WHERE headers IS NULL;
ALTER TABLE webhook_inbox ALTER COLUMN headers SET NOT NULL;
ALTER TABLE webhook_inbox ALTER COLUMN body SET NOT NULL;
ALTER TABLE webhook_inbox DROP COLUMN erased_at;
ALTER TABLE webhook_inbox DROP COLUMN attempt_errors;
