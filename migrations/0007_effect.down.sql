DROP TABLE IF EXISTS hookinbox_effect_once;
DROP TABLE IF EXISTS hookinbox_snapshot;
