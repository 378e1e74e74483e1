ALTER TABLE hookinbox_worker_routes DROP COLUMN IF EXISTS state;
