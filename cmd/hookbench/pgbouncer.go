package main

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
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgBouncerPoolSize is the server connections the benchmark's PgBouncer
// opens per database: fewer than the receiver's and the worker's pools
// together, so that they share them one transaction at a time.
const pgBouncerPoolSize = 20

// pgBouncer is PgBouncer in transaction pooling mode in front of the
// benchmark's server, started by startPgBouncer.
type pgBouncer struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
	dir  string
}

// findPgBouncer returns Debian's pgbouncer, or "" when it is not installed.
func findPgBouncer() string {
	if path, err := exec.LookPath("pgbouncer"); err == nil {
		return path
	}
	if _, err := os.Stat("/usr/sbin/pgbouncer"); err == nil {
		return "/usr/sbin/pgbouncer"
	}
	return ""
}

// startPgBouncer starts bin in transaction pooling mode in front of the
// server adminURL names, as the user postgres when hookbench runs as root
// (PgBouncer refuses root), on a loopback socket handed over as systemd's
// socket activation does, and waits until it answers. Its log goes to
// logDir/pgbouncer.log.
func startPgBouncer(ctx context.Context, bin, adminURL, logDir string) (*pgBouncer, error) {
	server, err := url.Parse(adminURL)
	if err != nil {
		return nil, fmt.Errorf("pgbouncer: DATABASE_URL must be a URL: %w", err)
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lnFile, err := ln.(*net.TCPListener).File()
	ln.Close()
	if err != nil {
		return nil, err
	}
	defer lnFile.Close()
	addr := ln.Addr().String()

	dir, err := os.MkdirTemp("", "hookbench-pgbouncer-")
	if err != nil {
		return nil, err
	}
	b := &pgBouncer{addr: addr, done: make(chan struct{}), dir: dir}
	ini, users := filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "users.txt")
	conf := fmt.Sprintf("[databases]\n* = host=%s port=%s\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = %d\n"+
		"unix_socket_dir =\nauth_type = trust\nauth_file = %s\npool_mode = transaction\ndefault_pool_size = %d\n"+
		"max_client_conn = 2000\nlogfile =\npidfile =\n",
		server.Hostname(), port, ln.Addr().(*net.TCPAddr).Port, users, pgBouncerPoolSize)
	if err := os.WriteFile(ini, []byte(conf), 0o600); err != nil {
		return nil, b.cleanup(err)
	}
	if err := os.WriteFile(users, fmt.Appendf(nil, "%q %q\n", username, password), 0o600); err != nil {
		return nil, b.cleanup(err)
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, b.cleanup(fmt.Errorf("pgbouncer refuses to run as root, and there is no postgres user: %w", err))
		}
		uid, _ := strconv.ParseUint(u.Uid, 10, 32)
		gid, _ := strconv.ParseUint(u.Gid, 10, 32)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, path := range []string{dir, ini, users} {
			if err := os.Chown(path, int(uid), int(gid)); err != nil {
				return nil, b.cleanup(err)
			}
		}
	}
	logFile, err := os.Create(filepath.Join(logDir, "pgbouncer.log"))
	if err != nil {
		return nil, b.cleanup(err)
	}
	defer logFile.Close()
	// LISTEN_PID must be pgbouncer's own pid: the shell's, which exec keeps.
	b.cmd = exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, bin, ini)
	b.cmd.Env = append(os.Environ(), "LISTEN_FDS=1")
	b.cmd.ExtraFiles = []*os.File{lnFile}
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	b.cmd.Stdout, b.cmd.Stderr = logFile, logFile
	if err := b.cmd.Start(); err != nil {
		return nil, b.cleanup(fmt.Errorf("start pgbouncer: %w", err))
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	if err := b.waitUp(ctx, adminURL); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

// waitUp connects through PgBouncer until it answers, for 10 s at most.
func (b *pgBouncer) waitUp(ctx context.Context, adminURL string) error {
	probe, err := b.url(adminURL)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, probe)
		if err == nil {
			return conn.Close(ctx)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgbouncer did not answer within 10 s: %w", err)
		}
		select {
		case <-b.done:
			return fmt.Errorf("pgbouncer exited: %v", b.cmd.ProcessState)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// url returns dbURL with PgBouncer's address in place of the server's.
func (b *pgBouncer) url(dbURL string) (string, error) {
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", err
	}
	u.Host = b.addr
	return u.String(), nil
}

// stop ends PgBouncer and removes its folder.
func (b *pgBouncer) stop() {
	if b.cmd != nil && b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done:
		case <-time.After(10 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	}
	os.RemoveAll(b.dir)
}

func (b *pgBouncer) cleanup(err error) error {
	os.RemoveAll(b.dir)
	return err
}
