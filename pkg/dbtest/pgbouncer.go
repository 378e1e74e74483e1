package dbtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/proctest"
)

// PgBouncer is a PgBouncer process in transaction pooling mode in front of
// DATABASE_URL's server, started for one test by StartPgBouncer.
type PgBouncer struct {
	// Process is the running pgbouncer; its log says what it did with each
	// client and server connection.
	Process *proctest.Process
	addr    string
}

// PgBouncerPoolSize is the server connections PgBouncer opens per database
// and user: fewer than the clients' pools, so that clients share them, one
// transaction at a time, as in production.
const PgBouncerPoolSize = 20

// pgbouncerPath finds Debian's pgbouncer (in /usr/sbin, which a non-root
// PATH may lack), or returns "".
func pgbouncerPath() string {
	if path, err := exec.LookPath("pgbouncer"); err == nil {
		return path
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer"
	}
	return ""
}

// StartPgBouncer starts PgBouncer (pool_mode = transaction, at most
// PgBouncerPoolSize server connections per database) in front of
// DATABASE_URL's server, on a loopback port, until the test ends. It skips
// the test, saying why, when pgbouncer is not installed (`.ci/run` installs
// Debian's). PgBouncer refuses to run as root, so a root test process runs
// it as the user postgres (or nobody).
//
// The listening socket is the test's, handed to pgbouncer as systemd's
// socket activation does (LISTEN_FDS), so no other process can take the
// port between choosing it and listening on it.
func StartPgBouncer(tb testing.TB) *PgBouncer {
	tb.Helper()
	bin := pgbouncerPath()
	if bin == "" {
		tb.Skip("pgbouncer is not installed (apt-get install pgbouncer; .ci/run does)")
	}
	server, err := url.Parse(ServerURL(tb))
	require.NoError(tb, err, "DATABASE_URL must be a URL")
	host, port := server.Hostname(), server.Port()
	if port == "" {
		port = "5432"
	}
	username := server.User.Username()
	if username == "" {
		username = "postgres"
	}
	password, _ := server.User.Password()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(tb, err)
	lnFile, err := ln.(*net.TCPListener).File()
	require.NoError(tb, err)
	ln.Close() // lnFile holds the socket, still listening.
	defer lnFile.Close()

	runAs := runAsUser(tb)
	// Not tb.TempDir: its parent is private to this user, and pgbouncer,
	// run as another, could not reach the config.
	dir, err := os.MkdirTemp("", "hookinbox-pgbouncer-") //nolint:usetesting // see above: pgbouncer runs as another user
	require.NoError(tb, err)
	tb.Cleanup(func() { os.RemoveAll(dir) })
	ini := filepath.Join(dir, "pgbouncer.ini")
	users := filepath.Join(dir, "users.txt")
	files := map[string]string{
		ini: fmt.Sprintf(`[databases]
* = host=%s port=%s
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = %d
max_client_conn = 1000
logfile =
pidfile =
`, host, port, ln.Addr().(*net.TCPAddr).Port, users, PgBouncerPoolSize),
		users: fmt.Sprintf("%q %q\n", username, password),
	}
	for path, content := range files {
		require.NoError(tb, os.WriteFile(path, []byte(content), 0o600))
	}
	if runAs != nil {
		for _, path := range []string{dir, ini, users} {
			require.NoError(tb, os.Chown(path, int(runAs.Uid), int(runAs.Gid)))
		}
	}

	// LISTEN_PID must be pgbouncer's own pid: the shell's, which exec keeps.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bin, ini)
	cmd.Env = append(os.Environ(), "LISTEN_FDS=1")
	cmd.ExtraFiles = []*os.File{lnFile} // fd 3, SD_LISTEN_FDS_START
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: runAs}
	p := proctest.Start(tb, cmd)
	p.WaitLine(tb, "process up: PgBouncer")
	require.Contains(tb, p.Log(), "socket passed from service manager",
		"this pgbouncer was built without systemd's socket activation")
	return &PgBouncer{Process: p, addr: fmt.Sprintf("127.0.0.1:%d", ln.Addr().(*net.TCPAddr).Port)}
}

// runAsUser returns the credentials to run pgbouncer with: postgres's (or
// nobody's) when the test runs as root, nil otherwise.
func runAsUser(tb testing.TB) *syscall.Credential {
	tb.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	tb.Skip("pgbouncer refuses to run as root, and there is no postgres or nobody user to run it as")
	return nil
}

// URL returns the URL that reaches db through PgBouncer.
func (b *PgBouncer) URL(tb testing.TB, db *DB) string {
	tb.Helper()
	u, err := url.Parse(db.URL)
	require.NoError(tb, err)
	u.Host = b.addr
	return u.String()
}

// Addr is PgBouncer's host:port.
func (b *PgBouncer) Addr() string { return b.addr }
