DROP TRIGGER IF EXISTS hookinbox_outbox_notify ON hookinbox_outbox;
DROP FUNCTION IF EXISTS hookinbox_outbox_notify();
DROP TABLE IF EXISTS hookinbox_outbox_destination;
DROP TABLE IF EXISTS hookinbox_outbox;
