package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// procConfig is what differs between the configs of the benchmarked
// processes. A zero field leaves the key out, so the product's default
// applies.
type procConfig struct {
	// ReceiverAddr and WorkerAddr are the listen addresses.
	ReceiverAddr, WorkerAddr string
	// MaxConns is database.max_conns.
	MaxConns int
	// BatchMaxEvents and BatchFlushers are the receiver's group-commit keys.
	BatchMaxEvents, BatchFlushers int
	// Handler is the handler every event is routed to: noop or ledger.
	Handler string
	// Concurrency is worker.concurrency.
	Concurrency int
	// GroupMaxEvents is worker.group_max_events.
	GroupMaxEvents int
	// QuietQueue adds the isolated storm's quiet source, on a queue of its
	// own that the worker works too.
	QuietQueue bool
	// DatabaseURL, when set, replaces the benchmark database (set in the
	// process's environment, never written to the config).
	DatabaseURL string
}

// writeConfig writes c as a hookinbox YAML config into dir and returns its
// path. The database URL comes from HOOKINBOX_DATABASE_URL, set on each
// process, so that it is never written to disk.
func writeConfig(dir, name string, c procConfig) (string, error) {
	var b strings.Builder
	b.WriteString("log: {level: info, format: json}\n")
	if c.MaxConns > 0 {
		fmt.Fprintf(&b, "database: {max_conns: %d}\n", c.MaxConns)
	}
	// No load balancer to wait for: the receiver stops at once on SIGTERM.
	fmt.Fprintf(&b, "receiver:\n  listen: %q\n  shutdown_delay: 0s\n", c.ReceiverAddr)
	if c.BatchMaxEvents > 0 {
		fmt.Fprintf(&b, "  batch_max_events: %d\n", c.BatchMaxEvents)
	}
	if c.BatchFlushers > 0 {
		fmt.Fprintf(&b, "  batch_flushers: %d\n", c.BatchFlushers)
	}
	fmt.Fprintf(&b, "sources:\n  - {name: %s, provider: %s, secrets: [%q]}\n", benchSource, benchProvider, benchSecret)
	if c.QuietQueue {
		fmt.Fprintf(&b, "  - {name: %s, provider: %s, secrets: [%q], queue: %s}\n", quietSource, benchProvider, benchSecret, queueQuiet)
	}
	fmt.Fprintf(&b, "worker:\n  listen: %q\n", c.WorkerAddr)
	if c.QuietQueue {
		fmt.Fprintf(&b, "  queues: [default, %s]\n", queueQuiet)
	}
	if c.Concurrency > 0 {
		fmt.Fprintf(&b, "  concurrency: %d\n", c.Concurrency)
	}
	if c.GroupMaxEvents > 0 {
		fmt.Fprintf(&b, "  group_max_events: %d\n", c.GroupMaxEvents)
	}
	handler := c.Handler
	if handler == "" {
		handler = "noop"
	}
	fmt.Fprintf(&b, "  routes:\n    - {source: %q, types: [%q], handlers: [%s]}\n", "*", "*", handler)

	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		return "", err
	}
	return path, nil
}
