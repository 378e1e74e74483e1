// Package relay delivers the transactional outbox (pkg/outbox): a Relay in
// the worker process claims due messages per destination, delivers them
// under each destination's concurrency cap and rate, and marks them
// delivered or due again; Store runs every statement on the outbox tables
// but Enqueue's (the relay's claim and marks, and inboxctl's list, replay,
// disable and enable); HTTP is the built-in HTTP destination. pkg/outbox
// states the guarantees.
package relay
