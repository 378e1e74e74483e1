SELECT count(*) FROM webhook_inbox AS i WHERE i.status = 'pending' AND i.held_at IS NULL AND NOT EXISTS (SELECT 1 FROM hookinbox_source_pause AS p WHERE p.source = i.source)
