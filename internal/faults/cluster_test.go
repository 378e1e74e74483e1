package faults_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
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
	c := makeCluster(t)
	c.run(t, "initdb", "-D", c.data, "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8", "--locale=C")
	c.configure(t, "postgresql.conf", conf)
	c.start(t)
	return c
}

// newStandby creates and starts a streaming standby of the cluster whose
// server from listens at from (the primary's port, or a proxy's in front of
// it): pg_basebackup -R, as an operator makes one, with conf appended to its
// postgresql.auto.conf (which -R writes, and which the server reads last).
func newStandby(t *testing.T, from, conf string) *cluster {
	t.Helper()
	c := makeCluster(t)
	host, port, err := net.SplitHostPort(from)
	require.NoError(t, err)
	c.run(t, "pg_basebackup", "-D", c.data, "-h", host, "-p", port, "-U", "postgres", "-R", "-X", "stream", "-c", "fast", "--no-sync",
		"-d", "application_name=standby")
	c.configure(t, "postgresql.auto.conf", conf)
	c.start(t)
	return c
}

// makeCluster reserves a cluster's folder and port, and removes them when
// the test ends, its server stopped (or, killed, its shared memory freed).
func makeCluster(t *testing.T) *cluster {
	t.Helper()
	code, out := proctest.Run(t, exec.Command("../../scripts/with-postgres.sh", "--print-bindir"))
	require.Equal(t, 0, code, out)
	c := &cluster{bindir: strings.TrimSpace(out), asPostgres: os.Geteuid() == 0}
	dir, err := os.MkdirTemp("", "hookinbox-faults-pg-") //nolint:usetesting // the postgres user must reach it, and t.TempDir's parent is root's, mode 0700
	require.NoError(t, err)
	c.dir, c.data = dir, filepath.Join(dir, "data")
	t.Cleanup(func() {
		if _, err := os.Stat(filepath.Join(c.data, "postmaster.pid")); err == nil {
			if c.command("pg_ctl", "-D", c.data, "-m", "immediate", "-w", "stop").Run() != nil {
				c.freeShmem()
			}
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
	c.port = strings.TrimPrefix(freePort(t), "127.0.0.1:")
	c.URL = "postgres://postgres@127.0.0.1:" + c.port + "/postgres?sslmode=disable"
	return c
}

// configure appends the cluster's address and conf to the data folder's
// file (postgresql.conf or postgresql.auto.conf).
func (c *cluster) configure(t *testing.T, file, conf string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(c.data, file), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = fmt.Fprintf(f, "\nlisten_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\n%s\n", c.port, c.dir, conf)
	require.NoError(t, err)
	require.NoError(t, f.Close())
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

// kill sends SIGKILL to the server's postmaster, as a crash of its machine
// would end it, and returns at once. Its backends end on their own once they
// see it gone.
func (c *cluster) kill(t *testing.T) {
	t.Helper()
	pid, _, ok := c.pidFile()
	require.True(t, ok, "the server's postmaster.pid")
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
}

// promote promotes a standby and waits until it accepts writes.
func (c *cluster) promote(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data, "-w", "-t", "60", "promote")
}

// pidFile reads the postmaster's pid and its System V shared memory id from
// postmaster.pid.
func (c *cluster) pidFile() (pid int, shmid string, ok bool) {
	b, err := os.ReadFile(filepath.Join(c.data, "postmaster.pid"))
	lines := strings.Split(string(b), "\n")
	if err != nil || len(lines) < 7 {
		return 0, "", false
	}
	pid, err = strconv.Atoi(lines[0])
	if f := strings.Fields(lines[6]); len(f) == 2 {
		shmid = f[1]
	}
	return pid, shmid, err == nil
}

// logTail returns the last n lines of the server's log (postgres.log),
// which the cleanup removes with the cluster: a failed run's reader needs
// what the server saw (a restart's recovery, refused or hung connections).
func (c *cluster) logTail(n int) string {
	b, err := os.ReadFile(filepath.Join(c.dir, "postgres.log"))
	if err != nil {
		return "postgres.log: " + err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// freeShmem removes the System V shared memory segment of a killed server,
// which nothing else would.
func (c *cluster) freeShmem() {
	if _, shmid, ok := c.pidFile(); ok && shmid != "" {
		_ = exec.Command("ipcrm", "-m", shmid).Run()
	}
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
	return c.dbURL(t, name)
}

// dbURL returns the URL of the cluster's database name.
func (c *cluster) dbURL(t *testing.T, name string) string {
	t.Helper()
	u, err := url.Parse(c.URL)
	require.NoError(t, err)
	u.Path = "/" + name
	return u.String()
}
