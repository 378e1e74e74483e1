-- The twin key: a second, logical identity of an event, for providers that
-- may send one logical event under two delivery ids (Stripe's duplicate
-- Event objects, Shopify's one webhook per subscription). Unique per source
-- where set. The claim names no conflict target, so this index is enforced
-- by the same INSERT … ON CONFLICT DO NOTHING as (source, event_id).
ALTER TABLE webhook_inbox ADD COLUMN twin_key text;

CREATE UNIQUE INDEX webhook_inbox_source_twin_key_key
    ON webhook_inbox (source, twin_key) WHERE twin_key IS NOT NULL;
