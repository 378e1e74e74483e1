// Package groupcommit runs many callers' requests in shared transactions:
// the one group-commit engine behind the receiver's claims
// (inbox.Batcher) and the worker's groups of events.
//
// Each caller's Do queues its request and waits. One collector gathers
// queued requests into batches of up to Config.MaxSize, waiting up to
// Config.Linger after a batch's first request for company, and, while every
// flusher is busy, letting the batch grow. A ready batch is shared out
// evenly among the idle flushers, each of which hands its part to the
// Flush function (one transaction, one COMMIT) and answers every caller
// with its own result. The queue is bounded: past Config.QueueSize waiting
// requests Do returns ErrOverloaded at once, so that an overload is a quick
// refusal rather than a pile-up.
//
// What a flush does is the caller's: the engine knows nothing of SQL.
package groupcommit
