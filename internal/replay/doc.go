// Package replay runs an inbox event's handlers again: one event at once,
// or every event a selection chooses as a bulk replay, an asynchronous,
// rate-limited, cancellable and resumable River job whose progress is kept in
// the hookinbox_replay table.
//
// A replay never inserts an inbox row: the row goes back to pending with a
// new River job (see inbox.Store.ReplayTx) and the worker takes it again
// because it is no longer done; the handlers' own keys keep their effect
// idempotent. The Manager is what operators' tools call (inboxctl, the
// worker's admin API); the Worker is the River worker of the bulk job, which
// pkg/worker registers.
package replay
