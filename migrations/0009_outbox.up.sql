-- The transactional outbox (pkg/outbox): messages a handler writes in its
-- event's transaction, delivered afterwards by the relay inside the worker.
-- A message is never deleted by hookinbox: it ends delivered or failed, and a
-- failed one stays until an operator replays it (`inboxctl outbox replay`).
CREATE TABLE hookinbox_outbox (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Stable across replays of the handler: <source>:<event_id>:<destination>
    -- by default, plus the handler's own suffix. Sent as webhook-id,
    -- Idempotency-Key and Nats-Msg-Id, so that consumers drop re-sends.
    key             text        NOT NULL UNIQUE,
    destination     text        NOT NULL,
    source          text        NOT NULL DEFAULT '',
    event_id        text        NOT NULL DEFAULT '',
    event_type      text        NOT NULL DEFAULT '',
    payload         bytea       NOT NULL,
    headers         jsonb       NOT NULL DEFAULT '{}',
    status          text        NOT NULL DEFAULT 'pending'
                                CHECK (status IN ('pending', 'delivered', 'failed')),
    -- Deliveries started; a claim counts one, and fences the relay's mark.
    attempts        integer     NOT NULL DEFAULT 0,
    -- When the message is due. A claim moves it forward by the relay's
    -- lease, so that a message whose relay died is due again after it.
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    -- One entry per finished attempt: {"at", "attempt", "error"?, "status"?}.
    history         jsonb       NOT NULL DEFAULT '[]',
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz
);

-- The relay's claim reads only undelivered rows, in due order.
CREATE INDEX hookinbox_outbox_due_idx ON hookinbox_outbox (next_attempt_at, id) WHERE status = 'pending';
-- `inboxctl outbox list` reads failed rows.
CREATE INDEX hookinbox_outbox_failed_idx ON hookinbox_outbox (destination, id) WHERE status = 'failed';

-- Destinations' persisted state: a 410 Gone disables a destination until an
-- operator enables it again (`inboxctl outbox enable`), across restarts.
CREATE TABLE hookinbox_outbox_destination (
    name            text        PRIMARY KEY,
    disabled_at     timestamptz,
    disabled_reason text
);

-- Wakes the relays at commit: one notification per inserting transaction
-- (PostgreSQL folds identical ones). Behind a transaction pooler nobody
-- LISTENs and the relays poll.
CREATE FUNCTION hookinbox_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hookinbox_outbox', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER hookinbox_outbox_notify AFTER INSERT ON hookinbox_outbox
    FOR EACH STATEMENT EXECUTE FUNCTION hookinbox_outbox_notify();
