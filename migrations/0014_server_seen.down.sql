DROP TABLE IF EXISTS hookinbox_server_seen;
