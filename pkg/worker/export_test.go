package worker

// QueuedForGroup returns how many jobs wait for a group transaction.
func (w *Worker) QueuedForGroup() int { return w.group.Waiting() }

// What the external tests reach that is not exported.
var CheckRoutes = checkRoutes

// AdvisoryKey returns the lock key a route's LockOption takes for an event
// of source whose located key is key.
func AdvisoryKey(source, key string) int64 { return advisoryKey(source, key) }
