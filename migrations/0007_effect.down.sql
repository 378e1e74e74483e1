DROP FUNCTION IF EXISTS hookinbox_sequence_order(text);
DROP TABLE IF EXISTS hookinbox_sequence;
DROP TABLE IF EXISTS hookinbox_effect_once;
DROP TABLE IF EXISTS hookinbox_snapshot;
