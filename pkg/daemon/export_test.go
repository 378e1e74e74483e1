package daemon

import "net/http"

// The unexported wiring the external tests drive directly.
var (
	NewSource     = newSource
	NewWorker     = newWorker
	QueueFor      = queueFor
	StartTracing  = startTracing
	WorkerHandler = workerHandler
)

// ReceiverHandler is receiverHandler on the server NewReceiver built.
func ReceiverHandler(env *Env, r *Receiver) http.Handler { return receiverHandler(env, r.srv) }
