DROP TABLE IF EXISTS webhook_inbox;
