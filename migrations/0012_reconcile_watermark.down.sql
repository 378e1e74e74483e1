DROP TABLE IF EXISTS hookinbox_reconcile_watermark;
