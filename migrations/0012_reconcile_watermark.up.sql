-- Reconciliation watermarks (issue 27): per source, the start of the last
-- reconciliation run that finished. The next run lists from there (less
-- the source's lookback), so a worker that was down for hours still asks
-- the provider for everything since. A failed run leaves it alone. Owned by
-- internal/reconcile (watermark.go).
CREATE TABLE hookinbox_reconcile_watermark (
    source           text        PRIMARY KEY,
    reconciled_until timestamptz NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);
