// Package pgbouncer prepares Debian's PgBouncer, in transaction pooling
// mode in front of one PostgreSQL server, for the tests
// (internal/testkit/dbtest) that run hookinbox through it.
//
// The listening socket is opened here and handed to pgbouncer as systemd's
// socket activation does (LISTEN_FDS), so no other process can take the
// port between choosing it and pgbouncer listening on it.
package pgbouncer

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// PoolSize is the server connections PgBouncer opens per database and
// user: fewer than the clients' pools together, so that clients share
// them, one transaction at a time, as in production.
const PoolSize = 20

// ErrNoUser is returned by Prepare when the process runs as root (which
// PgBouncer refuses) and there is no postgres or nobody user to run it as.
var ErrNoUser = errors.New("pgbouncer refuses to run as root, and there is no postgres or nobody user to run it as")

// Find returns Debian's pgbouncer (in /usr/sbin, which a non-root PATH may
// lack), or "" when it is not installed.
func Find() string {
	if path, err := exec.LookPath("pgbouncer"); err == nil {
		return path
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer"
	}
	return ""
}

// Bouncer is a prepared PgBouncer: Cmd is ready to start.
type Bouncer struct {
	// Cmd runs bin with its config; the caller sets its output and starts
	// it. Its log says "process up: PgBouncer" once it serves, and "socket
	// passed from service manager" when it took the handed-over socket.
	Cmd *exec.Cmd
	// Addr is the host:port PgBouncer listens on.
	Addr string

	listener *os.File
	dir      string
}

// Prepare writes the config of a PgBouncer (pool_mode = transaction, at
// most PoolSize server connections per database, maxClients clients) in
// front of the server serverURL names, opens its loopback socket, and
// returns the command that runs bin. A root process runs pgbouncer as
// postgres (or nobody). The caller starts Cmd, then calls Started, and
// calls Remove once pgbouncer has ended.
func Prepare(bin, serverURL string, maxClients int) (*Bouncer, error) {
	server, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: the server's URL: %w", err)
	}
	port := server.Port()
	if port == "" {
		port = "5432"
	}
	username := server.User.Username()
	if username == "" {
		username = "postgres"
	}
	password, _ := server.User.Password()
	// pgbouncer refuses to run as root: run it as postgres (or nobody).
	var runAs *syscall.Credential
	if os.Geteuid() == 0 {
		if runAs, err = unprivilegedUser(); err != nil {
			return nil, err
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: listen: %w", err)
	}
	listenPort := ln.Addr().(*net.TCPAddr).Port
	listener, err := ln.(*net.TCPListener).File()
	ln.Close() // listener holds the socket, still listening.
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: listen: %w", err)
	}
	// Not a test's TempDir: its parent is private to this user, and
	// pgbouncer, run as another, could not reach the config.
	dir, err := os.MkdirTemp("", "hookinbox-pgbouncer-")
	if err != nil {
		listener.Close()
		return nil, err
	}
	b := &Bouncer{Addr: fmt.Sprintf("127.0.0.1:%d", listenPort), listener: listener, dir: dir}
	ini, users := filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "users.txt")
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
max_client_conn = %d
logfile =
pidfile =
`, server.Hostname(), port, listenPort, users, PoolSize, maxClients),
		users: fmt.Sprintf("%q %q\n", username, password),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			b.Remove()
			return nil, err
		}
	}
	if runAs != nil {
		for _, path := range []string{dir, ini, users} {
			if err := os.Chown(path, int(runAs.Uid), int(runAs.Gid)); err != nil {
				b.Remove()
				return nil, err
			}
		}
	}
	// LISTEN_PID must be pgbouncer's own pid: the shell's, which exec keeps.
	b.Cmd = exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bin, ini)
	b.Cmd.Env = append(os.Environ(), "LISTEN_FDS=1")
	b.Cmd.ExtraFiles = []*os.File{listener} // fd 3, SD_LISTEN_FDS_START
	b.Cmd.SysProcAttr = &syscall.SysProcAttr{Credential: runAs}
	return b, nil
}

// Started closes this process's copy of the listening socket, once Cmd
// has started and holds its own.
func (b *Bouncer) Started() { b.listener.Close() }

// Remove closes the listening socket and removes the config folder.
func (b *Bouncer) Remove() {
	b.listener.Close()
	os.RemoveAll(b.dir)
}

// URL returns dbURL with PgBouncer's address in place of the server's.
func (b *Bouncer) URL(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	u.Host = b.Addr
	return u.String(), nil
}

// unprivilegedUser returns postgres's credentials, or nobody's.
func unprivilegedUser() (*syscall.Credential, error) {
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, ErrNoUser
}
