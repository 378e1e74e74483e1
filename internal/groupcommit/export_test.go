package groupcommit

// Collected returns how many requests the collector has taken in since
// Start (Waiting counts a request from its Do, before it is queued, until a
// flusher takes it).
func (c *Committer[T, R]) Collected() int { return int(c.collected.Load()) }
