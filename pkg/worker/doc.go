// Package worker processes inbox events with River: one job per inbox row.
// The row's done mark, committed with the handlers' writes, is the truth;
// River's batched completer completes the job once Work returns, and a job
// run again finds its row done and does nothing. Failures are retried with
// backoff; a poison event ends failed with its reason; a periodic reaper
// heals rows left without a live job.
//
// Users with their own business logic build a worker binary on this
// package: register handlers in a Registry, route to them by name in the
// config (Route), and call New, Start and Stop (see examples/ledger).
//
// # An event's life
//
// Every event takes one path, in event_worker.go, read top to bottom; River's
// producer (the worker looked up once, then handed down) and executor (execute,
// then reportResult) are its model:
//
//   - Work: the event's route is resolved once (newRun), from the job's source
//     and type, and handed down: its handlers and filter, its lock, its
//     sequence, its isolation and whether it may share a transaction.
//   - execute: a fenced worker begins nothing (its job is snoozed), a paused
//     source's event is held for Resume, an unknown source's is snoozed during
//     a rollout; the job's attempts are aligned with the worker's (attempts.go).
//   - In a group (group.go): jobs fetched together share one transaction. The
//     group takes their rows in one statement, runs each event's handlers
//     behind a savepoint of their own (savepoint.go) within a slice of the
//     job's time, records a failing event on its row, and commits once. An
//     event that is slow or meets another transaction's locks ends the group
//     and is handed over, with the rest, to be worked alone.
//   - Alone (process): in a transaction of its own, at its route's isolation
//     level; a sequenced event enters its key first (sequence.go: it runs,
//     parks behind an earlier event, or is held back), then the row is taken,
//     the lock gate passed, the handlers run, and the transaction commits
//     (inTx). A run that begins too late is put back uncharged.
//   - reportResult: the one place an outcome is settled, whatever the path:
//     done, parked or held (nil to River), deferred (a snooze, no attempt
//     counted: a lock, a sequence, a fenced worker, a run whose time its
//     neighbours spent or that lost its connection, see unchargedRuns, a
//     run that could not record its failure), or failed (recorded on the row,
//     unless the group did, and returned for River to retry, discard or
//     cancel). River counts an attempt exactly when the row does.
//   - A sequenced event's run then runs the events of its key it woke
//     (runInline), each with its own job as a fallback.
//
// Beside the path: the reaper (reaper.go) re-enqueues orphaned rows and wakes
// stalled sequence keys; the routes record (registration.go, rollout.go) lets
// one route set work a queue at a time; the pause watch (pause.go) is the
// worker's view of the paused sources; tracing.go makes a span of each run of
// an event's handlers. docs/design.md, "Working an event", has the reasons.
package worker
