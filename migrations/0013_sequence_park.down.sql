DROP TABLE IF EXISTS hookinbox_sequence_park;
