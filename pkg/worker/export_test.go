package worker

// QueuedForGroup returns how many jobs wait for a group transaction.
func (w *Worker) QueuedForGroup() int { return w.group.Waiting() }
