package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestCapacity runs the capacity verb against DATABASE_URL with short
// windows, and checks that every figure is there, positive and consistent
// with the formulas it prints, and that its scratch database is gone.
func TestCapacity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	serverURL := dbtest.ServerURL(t)
	var out bytes.Buffer
	c, err := runCapacity(ctx, []string{"--window", "300ms", "--conns", "2", "--group", "32", "--receivers", "2", "--workers", "3",
		"--worker-conns", "10"}, &out)
	require.NoError(t, err)
	text := out.String()
	t.Log(text)

	require.Equal(t, []int{1, 2, 4}, connsOf(c.Commits), "1, --conns and batch_flushers")
	for _, r := range c.Commits {
		require.Positive(t, r.PerSec, "%d conns", r.Conns)
		require.Positive(t, r.P50Millis, "%d conns", r.Conns)
		require.GreaterOrEqual(t, r.P99Millis, r.P50Millis, "%d conns", r.Conns)
	}
	for _, s := range []StepCost{c.Claim, c.Drain} {
		require.Positive(t, s.Events)
		require.Positive(t, s.EventsPerSec)
	}
	require.Positive(t, c.Claim.P50Millis)
	require.Equal(t, c.Commits[0].PerSec, c.Flushes)
	require.InDelta(t, 1000/c.Flushes, c.FlushMillis, 1e-9)
	require.Equal(t, c.Commits[2].PerSec, c.GroupCommits, "commits/s at batch_flushers (4) connections")
	require.InDelta(t, c.GroupCommits*32, c.IngestFlushBound, 1e-6, "C × G")
	require.Equal(t, min(c.IngestFlushBound, c.IngestCPUBound), c.Ingest)
	require.LessOrEqual(t, c.Ingest, c.GroupCommits*32, "ingest ≤ group commits/s × group size")
	require.Positive(t, c.Drained)
	require.Less(t, c.Pipeline, min(c.Ingest, c.Drained), "ingest and drain share the server")
	if c.Local {
		require.Positive(t, c.Claim.ServerMicros)
		require.Positive(t, c.Drain.ServerMicros)
		require.InDelta(t, float64(c.Cores)*1e6/c.Claim.ServerMicros, c.IngestCPUBound, 1e-6)
		require.Contains(t, text, "server CPU")
	} else {
		require.Equal(t, c.Claim.EventsPerSec, c.IngestCPUBound)
		require.Contains(t, text, "remote server")
	}
	require.Equal(t, 2*int(defaults.Database.MaxConns)+3*10, c.Conns)
	require.Equal(t, c.MaxConnections-c.Reserved, c.Allowed)
	require.Positive(t, c.Allowed)

	for _, want := range []string{
		"PostgreSQL " + c.Postgres, "fsync = " + c.Fsync,
		"  1 conns", "  2 conns", "  4 conns", "32 one-event deliveries per transaction",
	} {
		require.Contains(t, text, want)
	}
	for _, figure := range []float64{c.Flushes, c.GroupCommits, c.IngestFlushBound, c.IngestCPUBound, c.Ingest, c.Drained, c.Pipeline} {
		require.Contains(t, text, "= "+thousands(figure))
	}
	require.Contains(t, text, "= 2 × 16 + 3 × 10 = 62 of ")

	conn, err := pgx.Connect(ctx, serverURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var left bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, c.Database).Scan(&left))
	require.False(t, left, "the scratch database %s is dropped", c.Database)
}

// connsOf lists the connection counts of rates.
func connsOf(rates []CommitRate) []int {
	var out []int
	for _, r := range rates {
		out = append(out, r.Conns)
	}
	return out
}

// TestCapacityFlags refuses what the model cannot use.
func TestCapacityFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--window", "0s"}, {"--conns", "1,x"}, {"--group", "0"}, {"--receivers", "-1"}, {"extra"}} {
		_, err := parseCapacityOptions(args)
		require.Error(t, err, strings.Join(args, " "))
	}
	o, err := parseCapacityOptions([]string{"--conns", "16,1,16"})
	require.NoError(t, err)
	require.Equal(t, []int{1, defaults.Receiver.Flushers, 16}, o.Conns)
}
