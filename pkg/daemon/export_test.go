package daemon

// The unexported wiring the external tests drive directly.
var (
	NewSource          = newSource
	NewWorker          = newWorker
	QueueFor           = queueFor
	ReceiverHandler    = receiverHandler
	ReceiverOpsHandler = receiverOpsHandler
	StartTracing       = startTracing
	WorkerHandler      = workerHandler
)
