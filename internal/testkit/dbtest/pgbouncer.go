package dbtest

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/pgbouncer"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// PgBouncer is a PgBouncer process in transaction pooling mode in front of
// DATABASE_URL's server, started for one test by StartPgBouncer.
type PgBouncer struct {
	// Process is the running pgbouncer; its log says what it did with each
	// client and server connection.
	Process *proctest.Process
	bouncer *pgbouncer.Bouncer
}

// StartPgBouncer starts PgBouncer (pool_mode = transaction, at most
// pgbouncer.PoolSize server connections per database) in front of
// DATABASE_URL's server, on a loopback socket handed over by the test (see
// internal/testkit/pgbouncer), until the test ends. It skips the test, saying why, when
// pgbouncer is not installed (`.ci/run` installs Debian's) or cannot be run
// as a user other than root.
func StartPgBouncer(tb testing.TB) *PgBouncer {
	tb.Helper()
	bin := pgbouncer.Find()
	if bin == "" {
		tb.Skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
	}
	b, err := pgbouncer.Prepare(bin, ServerURL(tb), 1000)
	if errors.Is(err, pgbouncer.ErrNoUser) {
		tb.Skip(err.Error())
	}
	require.NoError(tb, err)
	tb.Cleanup(b.Remove)
	p := proctest.Start(tb, b.Cmd)
	b.Started()
	p.WaitLine(tb, "process up: PgBouncer")
	require.Contains(tb, p.Log(), "socket passed from service manager",
		"this pgbouncer was built without systemd's socket activation")
	return &PgBouncer{Process: p, bouncer: b}
}

// URL returns the URL that reaches db through PgBouncer.
func (b *PgBouncer) URL(tb testing.TB, db *DB) string {
	tb.Helper()
	u, err := b.bouncer.URL(db.URL)
	require.NoError(tb, err)
	return u
}
