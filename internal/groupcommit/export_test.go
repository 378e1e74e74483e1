package groupcommit

// Unreceived returns how many queued requests the collector has not taken
// in yet (Waiting counts a request from its Do until a flusher takes it).
func (c *Committer[T, R]) Unreceived() int { return len(c.queue) }
