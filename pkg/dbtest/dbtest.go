// Package dbtest gives each test a database of its own, migrated and ready.
//
// The first caller in a test run migrates a template database (named after a
// hash of the migrations, so a changed migration makes a new template); every
// test then gets CREATE DATABASE … TEMPLATE, which copies files and takes tens
// of milliseconds, and drops it in t.Cleanup. Tests can therefore commit,
// run several processes, and run in parallel without seeing each other.
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

	"github.com/hookinbox/hookinbox/pkg/schema"
)

// templateLock serialises template creation across test processes.
const templateLock int64 = 0x686f6f6b74706c // "hooktpl"

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

var templates sync.Map // template name -> *sync.Once-guarded error

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
	once.Do(func() { once.err = ensureTemplate(ctx, serverURL, tmpl, sets) })
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
	_, err = admin.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl))
	require.NoError(tb, err)

	dbURL := WithDatabase(tb, serverURL, name)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(tb, err)
	tb.Cleanup(func() {
		pool.Close()
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

func ensureTemplate(ctx context.Context, serverURL, tmpl string, sets []*schema.Set) error {
	admin, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLock); err != nil {
		return err
	}
	defer admin.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", templateLock) //nolint:errcheck // admin.Close, deferred above, ends the session and the lock anyway

	var exists bool
	if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", tmpl).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	building := tmpl + "_build"
	if _, err := admin.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", building)); err != nil {
		return err
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+building); err != nil {
		return err
	}
	u, _ := url.Parse(serverURL)
	u.Path = "/" + building
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return err
	}
	_, err = schema.Migrate(ctx, pool, sets...)
	pool.Close()
	if err != nil {
		return fmt.Errorf("migrate template: %w", err)
	}
	// Renaming last makes a half-built template invisible to other runs.
	_, err = admin.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s RENAME TO %s", building, tmpl))
	return err
}

func templateName(tb testing.TB, sets []*schema.Set) string {
	tb.Helper()
	h := sha256.New()
	for _, set := range sets {
		ms, err := set.Migrations()
		require.NoError(tb, err)
		fmt.Fprintf(h, "set %s\n", set.Name)
		for _, m := range ms {
			fmt.Fprintf(h, "%d %s %s\n", m.Version, m.Name, m.SQL)
		}
	}
	fmt.Fprintf(h, "river %d\n", riverVersion())
	return "hookinbox_tpl_" + hex.EncodeToString(h.Sum(nil))[:16]
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
