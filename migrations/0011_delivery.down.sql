-- Moves the bytes back into the inbox rows: a full rewrite of the rows
-- received since 0011, under the table's lock for its duration.
ALTER TABLE webhook_inbox RENAME COLUMN legacy_payload TO payload;
ALTER TABLE webhook_inbox RENAME COLUMN legacy_body TO body;
ALTER TABLE webhook_inbox RENAME COLUMN legacy_headers TO headers;
ALTER TABLE webhook_inbox ALTER COLUMN headers SET DEFAULT '{}';
UPDATE webhook_inbox AS i SET payload = d.payload, body = d.body, headers = d.headers
FROM webhook_inbox_delivery AS d WHERE d.inbox_id = i.id;
DROP TABLE webhook_inbox_delivery;
