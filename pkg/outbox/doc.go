// Package outbox is hookinbox's transactional outbox as a handler sees it: a
// handler writes "deliver this" in its event's transaction (Enqueue), and
// the relay inside the worker process (internal/relay) delivers it
// afterwards to a Destination (an HTTP endpoint, a NATS JetStream stream, or
// any Destination a worker binary brings). A Destination gets each message
// as a Record and answers with nil, or with one of the errors below that
// tell the relay how to go on.
//
// # Guarantees
//
// Inside PostgreSQL the effect is exactly once: the message row commits with
// the handler's other writes, the inbox row's done mark and the River job's
// completion, or not at all; and its key is unique, so a handler that runs
// again for the same event (a retry, a replay) queues no second copy.
//
// Beyond PostgreSQL delivery is at least once, with a stable key. The relay
// claims a batch in a short transaction that moves the rows' next_attempt_at
// forward by a lease and counts an attempt, delivers outside any
// transaction, then marks each message delivered. A relay that dies between
// a delivery and its mark (kill -9, a lost connection) leaves the message
// due again when the lease ends, and another relay sends it again: at most
// the claimed, unmarked batch is re-sent. Every delivery carries the key
// (webhook-id and Idempotency-Key over HTTP, Nats-Msg-Id on JetStream), so
// the consumer, or JetStream's duplicate window, drops re-sends.
//
// # Keys
//
// The default key is "<source>:<event_id>:<destination>". A handler that
// emits several messages for one event to one destination sets
// Message.KeySuffix, which must be the same each time the handler runs for
// that event (a line number, an object id; never a random value or a time).
//
// # Retries
//
// A failed delivery is retried with exponential backoff and full jitter
// (per destination: its backoff_min and backoff_max), honouring a Retry-After
// (RetryAfter). After the destination's MaxAttempts the message is failed:
// never deleted, listed by `inboxctl outbox list` and put back by
// `inboxctl outbox replay`. A 410 Gone (Disable) disables the destination,
// in the database, until `inboxctl outbox enable`; its messages wait,
// pending.
package outbox
