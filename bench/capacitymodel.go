package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Capacity is what the capacity verb measured and what it derives: the
// events per second this server sustains durably, and the connections a
// deployment of N receivers and M workers takes.
type Capacity struct {
	Options  *capacityOptions `json:"-"`
	Postgres string           `json:"postgres"`
	// Local says the server runs on this machine: its CPU per event is
	// measured, and Cores are its cores.
	Local bool `json:"local_server"`
	Cores int  `json:"cores"`
	// MaxConnections less Reserved (superuser_reserved_connections and, from
	// PostgreSQL 16, reserved_connections) is what hookinbox may open.
	MaxConnections int `json:"max_connections"`
	Reserved       int `json:"reserved_connections"`
	// Fsync and WALSyncMethod are the server's settings that decide what a
	// flush costs: with fsync off no commit is durable.
	Fsync         string `json:"fsync"`
	WALSyncMethod string `json:"wal_sync_method"`
	// Database is the scratch database, dropped at the end.
	Database string `json:"database"`
	// LoadAvg is this machine's load average at the start (/proc/loadavg):
	// other work on a local server's cores inflates its CPU per event.
	LoadAvg string `json:"load_average,omitempty"`

	Commits []CommitRate `json:"durable_commits"`
	Claim   StepCost     `json:"claim"`
	Drain   StepCost     `json:"drain"`

	// Derived by derive.

	// Flushes is the durable commits per second of one connection: each
	// waits for a WAL flush of its own. FlushMillis is one flush.
	Flushes     float64 `json:"flushes_per_sec"`
	FlushMillis float64 `json:"flush_ms"`
	// GroupCommits is the durable commits per second at batch_flushers
	// connections: the claim transactions the server can flush.
	GroupCommits float64 `json:"group_commits_per_sec"`
	// IngestFlushBound is GroupCommits × the group's events; IngestCPUBound
	// the cores over the claim's CPU per event (the measured claim rate on
	// a remote server). Ingest is the lesser.
	IngestFlushBound float64 `json:"ingest_flush_bound"`
	IngestCPUBound   float64 `json:"ingest_cpu_bound"`
	Ingest           float64 `json:"ingest_events_per_sec"`
	// Drained is the cores over the drain's CPU per event (the measured
	// drain rate on a remote server): the worker's commits do not wait for
	// a flush. Pipeline is ingest and drain on the same server at once,
	// 1/(1/Ingest + 1/Drained).
	Drained  float64 `json:"drain_events_per_sec"`
	Pipeline float64 `json:"pipeline_events_per_sec"`
	// Conns is N receivers' and M workers' connections; Allowed the
	// server's.
	Conns   int `json:"connections"`
	Allowed int `json:"connections_allowed"`
}

// readServer reads the server's version and connection limits.
func (c *Capacity) readServer(ctx context.Context, pool *pgxpool.Pool) error {
	err := pool.QueryRow(ctx, `
SELECT current_setting('server_version'), current_setting('max_connections')::int,
       current_setting('superuser_reserved_connections')::int + coalesce(current_setting('reserved_connections', true), '0')::int,
       current_setting('fsync'), current_setting('wal_sync_method'), current_database()`).
		Scan(&c.Postgres, &c.MaxConnections, &c.Reserved, &c.Fsync, &c.WALSyncMethod, &c.Database)
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			c.LoadAvg = strings.Join(f[:3], " ")
		}
	}
	return err
}

// derive computes the model from the measurements.
func (c *Capacity) derive() {
	o := c.Options
	for _, r := range c.Commits {
		switch r.Conns {
		case 1:
			c.Flushes, c.FlushMillis = r.PerSec, 1000/r.PerSec
		case o.Flushers:
			c.GroupCommits = r.PerSec
		}
	}
	if o.Flushers == 1 {
		c.GroupCommits = c.Flushes
	}
	c.Local = c.Claim.ServerMicros > 0 && c.Drain.ServerMicros > 0
	c.IngestFlushBound = c.GroupCommits * float64(o.Group)
	c.IngestCPUBound, c.Drained = c.Claim.EventsPerSec, c.Drain.EventsPerSec
	if c.Local {
		c.IngestCPUBound = float64(c.Cores) * 1e6 / c.Claim.ServerMicros
		c.Drained = float64(c.Cores) * 1e6 / c.Drain.ServerMicros
	}
	c.Ingest = min(c.IngestFlushBound, c.IngestCPUBound)
	c.Pipeline = 1 / (1/c.Ingest + 1/c.Drained)
	c.Conns = o.Receivers*o.ReceiverConns + o.Workers*o.WorkerConns
	c.Allowed = c.MaxConnections - c.Reserved
}

// print writes the measurements, the formulas and their figures.
func (c *Capacity) print(w io.Writer) {
	o := c.Options
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	where := "remote server: wall-time figures only, the measured rates stand in for the CPU bounds"
	if c.Local {
		where = fmt.Sprintf("local server, %d cores: CPU read from /proc for the scratch database's backends", c.Cores)
	}
	p("hookbench capacity: PostgreSQL %s (%s), %s per measurement, load average %s at the start",
		c.Postgres, where, o.Window, c.LoadAvg)
	p("")
	p("durable commits (INSERT of a tiny row + COMMIT, synchronous_commit = on; fsync = %s, wal_sync_method = %s):", c.Fsync, c.WALSyncMethod)
	if c.Fsync != "on" {
		p("  WARNING: fsync is off: no commit on this server is durable, and the flush figures below measure no disk")
	}
	for _, r := range c.Commits {
		p("  %3d conns  %9s commits/s  p50 %6.2f ms  p99 %6.2f ms", r.Conns, thousands(r.PerSec), r.P50Millis, r.P99Millis)
	}
	p("claim (receiver: Ingester.IngestGroup, %d one-event deliveries per transaction, %d conns = batch_flushers):", o.Group, o.Flushers)
	p("  %s events/s, p50 %.1f ms per transaction%s", thousands(c.Claim.EventsPerSec), c.Claim.P50Millis, cpuPerEvent(c.Claim))
	p("drain (pkg/worker in-process, noop handler, concurrency %d, group_max_events %d, max_conns %d; take + done mark + River's fetch and completion):",
		o.WorkerConcurrency, o.WorkerGroup, o.WorkerConns)
	p("  %s events/s%s", thousands(c.Drain.EventsPerSec), cpuPerEvent(c.Drain))
	p("")
	p("what this server sustains durably:")
	f := func(name, formula, value string) { p("  %-18s = %-46s = %s", name, formula, value) }
	f("flushes/s F", "commits/s at 1 conn", fmt.Sprintf("%s (one flush %.2f ms)", thousands(c.Flushes), c.FlushMillis))
	f("group commits/s C", fmt.Sprintf("commits/s at batch_flushers (%d) conns", o.Flushers), thousands(c.GroupCommits))
	f("ingest flush bound", fmt.Sprintf("C × G (G = %d events per claim)", o.Group), thousands(c.IngestFlushBound)+" events/s")
	if c.Local {
		f("ingest CPU bound", fmt.Sprintf("cores × 10⁶ / claim µs = %d × 10⁶ / %.0f", c.Cores, c.Claim.ServerMicros), thousands(c.IngestCPUBound)+" events/s")
		f("drain", fmt.Sprintf("cores × 10⁶ / drain µs = %d × 10⁶ / %.0f", c.Cores, c.Drain.ServerMicros), thousands(c.Drained)+" events/s")
	} else {
		f("ingest CPU bound", "the measured claim rate", thousands(c.IngestCPUBound)+" events/s")
		f("drain", "the measured drain rate", thousands(c.Drained)+" events/s")
	}
	f("ingest", "min(flush bound, CPU bound)", thousands(c.Ingest)+" events/s")
	f("pipeline", "1 / (1/ingest + 1/drain), both at once", thousands(c.Pipeline)+" events/s")
	p("  (groups of CPU bound / C = %.0f events keep the flushes from binding; a transaction per delivery",
		c.IngestCPUBound/c.GroupCommits)
	p("   (batch_max_events 1) is bound by C: %s events/s)", thousands(min(c.GroupCommits, c.IngestCPUBound)))
	p("  (the server's side only: the receivers' and workers' own CPU comes on top, on their own cores or these)")
	p("")
	verdict := "fits"
	if c.Conns > c.Allowed {
		verdict = "EXCEEDS the server's limit: lower database.max_conns or put a pooler in front (docs/pgbouncer.md)"
	}
	p("connections = N × receiver max_conns + M × worker max_conns (River's are part of the worker's)")
	p("            = %d × %d + %d × %d = %d of %d allowed (max_connections %d − %d reserved): %s",
		o.Receivers, o.ReceiverConns, o.Workers, o.WorkerConns, c.Conns, c.Allowed, c.MaxConnections, c.Reserved, verdict)
}

// cpuPerEvent is a step's server CPU per event, when measured.
func cpuPerEvent(s StepCost) string {
	if s.ServerMicros <= 0 {
		return ""
	}
	return fmt.Sprintf(", server CPU %.0f µs/event", s.ServerMicros)
}
