package faults_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// cluster is a private PostgreSQL cluster a scenario owns, so that it can
// restart the server or exhaust its connections without touching the
// server the other tests share. As root, initdb and pg_ctl run as the
// postgres user, as scripts/with-postgres.sh does.
type cluster struct {
	bindir, dir, data string
	port              string
	asPostgres        bool
	// URL reaches the cluster's postgres database.
	URL string
}

// newCluster creates and starts a cluster with conf appended to its
// postgresql.conf; the test's cleanup stops and removes it.
func newCluster(t *testing.T, conf string) *cluster {
	t.Helper()
	code, out := proctest.Run(t, exec.Command("../../scripts/with-postgres.sh", "--print-bindir"))
	require.Equal(t, 0, code, out)
	c := &cluster{bindir: strings.TrimSpace(out), asPostgres: os.Geteuid() == 0}
	dir, err := os.MkdirTemp("", "hookinbox-faults-pg-") //nolint:usetesting // the postgres user must reach it, and t.TempDir's parent is root's, mode 0700
	require.NoError(t, err)
	c.dir, c.data = dir, filepath.Join(dir, "data")
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(c.data, "postmaster.pid")); err == nil {
			_ = c.command("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop").Run()
		}
		_ = os.RemoveAll(dir)
	})
	if c.asPostgres {
		pg, err := user.Lookup("postgres")
		require.NoError(t, err, "running as root: the cluster runs as the postgres user")
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		require.NoError(t, os.Chown(dir, uid, gid))
	}
	c.run(t, "initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C")
	c.port = strings.TrimPrefix(freePort(t), "127.0.0.1:")
	f, err := os.OpenFile(filepath.Join(c.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "\nlisten_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\n%s\n", c.port, dir, conf)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	c.start(t)
	c.URL = "postgres://postgres@127.0.0.1:" + c.port + "/postgres?sslmode=disable"
	return c
}

// command returns the server binary name with args, run as postgres when
// the test runs as root.
func (c *cluster) command(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(c.bindir, name)
	if c.asPostgres {
		cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", bin}, args...)...)
		cmd.Dir = "/"
		return cmd
	}
	return exec.Command(bin, args...)
}

func (c *cluster) run(t *testing.T, name string, args ...string) {
	t.Helper()
	code, out := proctest.Run(t, c.command(name, args...))
	require.Equal(t, 0, code, "%s %v: %s", name, args, out)
}

// start starts the server and waits until it accepts connections.
func (c *cluster) start(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data, "-l", filepath.Join(c.dir, "postgres.log"), "-w", "-t", "60", "start")
}

// stop stops the server with pg_ctl's shutdown mode (fast, immediate) and
// waits until it is down.
func (c *cluster) stop(t *testing.T, mode string) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data, "-m", mode, "-w", "-t", "60", "stop")
}

// createDB creates a database on the cluster and returns its URL.
func (c *cluster) createDB(t *testing.T, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.URL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	require.NoError(t, err)
	u, err := url.Parse(c.URL)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}
