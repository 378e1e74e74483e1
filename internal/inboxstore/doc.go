// Package inboxstore is hookinbox's deduplicating event inbox in PostgreSQL: the
// webhook_inbox table, the claim that lets each event in exactly once, and
// the row transitions (done, failed, re-enqueued) that workers and the reaper
// make.
//
// It is the table's only owner. Every rule about what may enter it (the key
// policy: fallback ids, failed-on-arrival reasons, see Delivery) is applied
// here to whatever a producer hands in, and every statement on it runs
// through a Store: store.go holds those of the receiver, the workers and the
// CLI. The handler-facing vocabulary (Event, Status, ErrNotFound) is
// pkg/inbox, aliased here.
//
// # An event's life
//
// A row's statuses are pending, done and failed; each step below is one
// statement, or a few in one transaction, of this package:
//
//   - Claimed (ingest.go, batcher.go): a Delivery's events pass the key policy
//     and are claimed with one INSERT … ON CONFLICT DO NOTHING (Ingester.claim,
//     the one claim: a delivery alone is a group of one); each new row,
//     pending, gets its River job (JobArgs, one per row) in the same
//     transaction. The Batcher shares one transaction among concurrent
//     deliveries (internal/groupcommit).
//   - Taken (Store.Take, of one row or of a group's): the
//     worker's transaction locks the row, marks it done and reads it, in one
//     statement; the handlers' writes commit with that mark, or roll back
//     with it. A row done already is not returned: an effect never runs twice.
//   - Failed (Store.RecordFailure after a rollback, Store.UndoTakes with a
//     failure in a group's transaction): the attempt is counted and its error kept in the
//     row's history (history.go); the row stays pending for River's retry, or
//     is failed for good. UndoTakes puts back, as they were, the rows a group
//     handed over.
//   - Held (pause.go): a paused source's rows wait with no job; Resume
//     enqueues them again.
//   - Sequenced (sequence.go): a sequenced route's event is located in its key,
//     parked behind the key's earlier events, and woken with a new job when
//     they have run.
//   - Healed (store.go: ListOrphans, MoveJobs): the worker's reaper re-enqueues
//     rows left pending without a live job.
//   - Replayed (replay.go), pruned or erased (retention.go): what the operator
//     and the retention job do to rows that are done or failed.
package inboxstore
