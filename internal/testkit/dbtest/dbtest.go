// Package dbtest gives each test a database of its own, migrated and ready.
//
// The first caller in a test process migrates a template database for the
// migration sets it asks for; every test then gets CREATE DATABASE …
// TEMPLATE, which copies files and takes tens of milliseconds, and drops it in
// t.Cleanup. Tests can therefore commit, run several processes, and run in
// parallel without seeing each other. The templates belong to the test
// process that made them: Main, called from the package's TestMain, drops
// them when the package's tests end, so a test run leaves no database behind
// on the server, and concurrent runs never share one.
//
// The server comes from DATABASE_URL; `make test` starts a private cluster
// when it is unset.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/pkg/schema"
)

// Main runs a package's tests, drops the template databases this process
// made and removes the binaries proctest.Build made, and exits; a goroutine the tests left running fails the package, as
// goleak.VerifyTestMain would. Call it from TestMain.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// Run is Main without the exit: it returns the exit code, so that a
// TestMain can report something after the tests (internal/faults prints its
// table) before it exits.
func Run(m *testing.M) int {
	code := m.Run()
	proctest.RemoveBuilds()
	if err := dropTemplates(); err != nil {
		fmt.Fprintln(os.Stderr, "dbtest:", err)
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: leaked goroutines:", err)
			code = 1
		}
	}
	return code
}

// processID names this process's templates, so that test processes running
// at once (the packages of one run, or two runs on one server) never share or
// drop each other's.
var processID = randomHex(4)

// ServerURL returns DATABASE_URL, failing the test when it is unset.
func ServerURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("DATABASE_URL")
	if u == "" {
		tb.Fatal("DATABASE_URL is not set: run the tests with `make test`, which starts a private PostgreSQL when needed")
	}
	return u
}

// DB is a test's own database.
type DB struct {
	// Pool is connected to the database.
	Pool *pgxpool.Pool
	// URL reaches the database; hand it to subprocesses.
	URL string
	// Name is the database's name.
	Name string
}

var templates sync.Map // template name -> *templateOnce

// New creates a fresh database from a template migrated with River's and the
// given sets (schema.Core() when none are given), and drops it when the test
// ends.
func New(tb testing.TB, sets ...*schema.Set) *DB {
	tb.Helper()
	if len(sets) == 0 {
		sets = []*schema.Set{schema.Core()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	serverURL := ServerURL(tb)
	tmpl := templateName(tb, sets)
	onceAny, _ := templates.LoadOrStore(tmpl, &templateOnce{})
	once := onceAny.(*templateOnce)
	once.Do(func() { once.err = buildTemplate(ctx, serverURL, tmpl, sets) })
	require.NoError(tb, once.err, "prepare template database")

	return create(tb, tmpl)
}

func create(tb testing.TB, tmpl string) *DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	serverURL := ServerURL(tb)
	name := "hookinbox_test_" + randomHex(6)
	admin, err := pgx.Connect(ctx, serverURL)
	require.NoError(tb, err)
	defer admin.Close(ctx)
	// FILE_COPY copies the template's files; PostgreSQL 15's default,
	// WAL_LOG, writes them all to the WAL (4 MB a database, hundreds a
	// run): make test took 302 s instead of 325.
	_, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s STRATEGY FILE_COPY", name, tmpl))
	require.NoError(tb, err)

	dbURL := WithDatabase(tb, serverURL, name)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		// Close waits for every connection in use: a handler stuck past
		// its context, or a transaction a failed test left open, would
		// hang the package until go test's timeout. The drop below ends
		// them.
		closed := make(chan struct{})
		go func() { pool.Close(); close(closed) }()
		select {
		case <-closed:
		case <-time.After(30 * time.Second):
			tb.Errorf("dbtest: %d connections to %s still in use 30s after the test ended (a stuck handler, or a transaction left open); dropping it anyway",
				pool.Stat().AcquiredConns(), name)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			tb.Logf("drop %s: %v", name, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name)); err != nil {
			tb.Logf("drop %s: %v", name, err)
		}
	})
	return &DB{Pool: pool, URL: dbURL, Name: name}
}

// NewEmpty creates a fresh database with no schema at all, dropped when the
// test ends.
func NewEmpty(tb testing.TB) *DB {
	tb.Helper()
	return create(tb, "template0")
}

type templateOnce struct {
	sync.Once
	err error
}

// WithDatabase returns serverURL with its database replaced by name.
func WithDatabase(tb testing.TB, serverURL, name string) string {
	tb.Helper()
	u, err := url.Parse(serverURL)
	require.NoError(tb, err, "DATABASE_URL must be a URL")
	u.Path = "/" + name
	return u.String()
}

// buildTemplate creates the template database tmpl, migrated with sets.
func buildTemplate(ctx context.Context, serverURL, tmpl string, sets []*schema.Set) error {
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer admin.Close(ctx)
	building := tmpl + "_build"
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return err
	}
	u, _ := url.Parse(serverURL)
	u.Path = "/" + building
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return err
	}
	_, err = schema.Migrate(ctx, pool, nil, sets...)
	pool.Close()
	if err != nil {
		_, _ = admin.Exec(context.WithoutCancel(ctx), fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", building))
		return fmt.Errorf("migrate template: %w", err)
	}
	// Renaming last makes a half-built template invisible to its users.
	_, err = admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, tmpl))
	return err
}

// dropTemplates drops the templates this process made (and any it left half
// built).
func dropTemplates() error {
	var names []string
	templates.Range(func(name, _ any) bool {
		names = append(names, name.(string))
		return true
	})
	if len(names) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return fmt.Errorf("drop templates: %w", err)
	}
	defer conn.Close(ctx)
	for _, name := range names {
		for _, db := range []string{name, name + "_build"} {
			if _, err := conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", db)); err != nil {
				return fmt.Errorf("drop template %s: %w", db, err)
			}
		}
	}
	return nil
}

func templateName(tb testing.TB, sets []*schema.Set) string {
	tb.Helper()
	h := sha256.New()
	for _, set := range sets {
		fmt.Fprintf(h, "set %s\n", set.Name)
		err := fs.WalkDir(set.FS, ".", func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			sql, err := fs.ReadFile(set.FS, name)
			fmt.Fprintf(h, "%s %s\n", name, sql)
			return err
		})
		require.NoError(tb, err)
	}
	fmt.Fprintf(h, "river %d\n", riverVersion())
	return "hookinbox_tpl_" + processID + "_" + hex.EncodeToString(h.Sum(nil))[:16]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// riverVersion is River's latest migration, so a River upgrade makes a new
// template too.
func riverVersion() int {
	migrator, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return 0
	}
	all := migrator.AllVersions()
	return all[len(all)-1].Version
}

// WaitForLockWaiters waits until n sessions of the database wait on a lock:
// the signal that a statement under test has reached a row or key another
// transaction holds. It fails the test after 30 seconds.
func (db *DB) WaitForLockWaiters(tb testing.TB, n int) {
	tb.Helper()
	require.Eventually(tb, func() bool {
		var waiting int
		err := db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		return err == nil && waiting == n
	}, 30*time.Second, 5*time.Millisecond, "never saw %d session(s) waiting on a lock", n)
}

// BlockedJobs returns the inbox ids of the running jobs of kind whose row
// is held (taken, not committed) by a transaction that waits on a lock:
// work that cannot finish while the lock is held. Crash tests hold a lock
// a handler needs, wait until every job in flight is blocked on it, and
// only then kill the worker, so that what the kill interrupts is fixed by
// construction.
func BlockedJobs(t testing.TB, pool *pgxpool.Pool, kind string) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT i.id FROM river_job AS j
JOIN webhook_inbox AS i ON i.id = (j.args->>'inbox_id')::bigint
JOIN pg_stat_activity AS a ON a.backend_xid = i.xmax
WHERE j.kind = $1 AND j.state = 'running' AND i.status = 'pending'
  AND a.datname = current_database() AND a.wait_event_type = 'Lock'
ORDER BY 1`, kind)
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	require.NoError(t, err)
	return ids
}
