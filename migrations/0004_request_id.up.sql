-- The X-Request-Id of the delivery that brought the event in (the receiver's
-- own when the client sent none), so that a worker's log lines, an
-- ingress's log and the provider's delivery log can be joined on it.
ALTER TABLE webhook_inbox ADD COLUMN request_id text;

-- Failed rows, for the backlog metric and `inboxctl events list --status
-- failed`: few rows, so a small index, and no scan of the done ones.
CREATE INDEX webhook_inbox_failed_idx ON webhook_inbox (received_at) WHERE status = 'failed';
