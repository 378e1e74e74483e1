-- The deposit ledger of examples/ledger.
CREATE TABLE ledger_accounts (
    account_id text PRIMARY KEY,
    balance    numeric(14, 2) NOT NULL DEFAULT 0
);

-- One entry per applied event. Its unique key is the second layer of
-- idempotency: even an event that bypassed the inbox (a replay of a pruned
-- row, a second logical event) cannot be applied twice.
CREATE TABLE ledger_entries (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source     text           NOT NULL,
    event_id   text           NOT NULL,
    account_id text           NOT NULL REFERENCES ledger_accounts (account_id),
    amount     numeric(14, 2) NOT NULL,
    created_at timestamptz    NOT NULL DEFAULT now(),
    CONSTRAINT ledger_entries_source_event_id_key UNIQUE (source, event_id)
);
