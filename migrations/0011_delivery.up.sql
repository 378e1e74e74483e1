-- The delivery's bytes leave the inbox row (issue 26). A delivery's payload,
-- raw body and headers never change once claimed, while the row's status,
-- attempts and timestamps change on every take. Kept in one row, every take
-- wrote a new version of the whole ~2 KB row; now it writes a new version of
-- the narrow row only, and reads the bytes from webhook_inbox_delivery,
-- which is insert-only (a row is deleted when its data is erased or pruned).
-- docs/design.md, "The take", has the A/B that chose this layout.
--
-- Rows received before this migration keep their bytes where they are, in
-- the renamed legacy_* columns, and readers take coalesce(delivery, legacy):
-- nothing is copied, so the migration takes its ACCESS EXCLUSIVE lock for
-- milliseconds whatever the inbox's size. The rename also makes a binary
-- from before this migration fail loudly (column "body" does not exist: a
-- 503 for a delivery, a retried job for a worker) instead of writing or
-- reading rows it no longer understands during a rolling upgrade. The
-- legacy columns empty as retention erases and prunes the old rows.
CREATE TABLE webhook_inbox_delivery (
    inbox_id bigint PRIMARY KEY,
    -- The parsed event; NULL when an authentic delivery could not be parsed.
    payload  jsonb,
    -- The raw bytes the signature covered, and the headers needed to verify
    -- them again.
    body     bytea NOT NULL,
    headers  jsonb NOT NULL DEFAULT '{}'
);

ALTER TABLE webhook_inbox RENAME COLUMN payload TO legacy_payload;
ALTER TABLE webhook_inbox RENAME COLUMN body TO legacy_body;
ALTER TABLE webhook_inbox RENAME COLUMN headers TO legacy_headers;
ALTER TABLE webhook_inbox ALTER COLUMN legacy_headers DROP DEFAULT;
