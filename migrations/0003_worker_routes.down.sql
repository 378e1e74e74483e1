DROP TABLE IF EXISTS hookinbox_worker_routes;
