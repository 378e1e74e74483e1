package daemon_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// buildCommands compiles cmd/receiver, cmd/worker and cmd/inboxctl once per
// test run.
var buildCommands = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "hookinbox-bin-")
	if err != nil {
		return "", err
	}
	out, err := exec.Command("go", "build", "-o", dir+"/", "../../cmd/receiver", "../../cmd/worker", "../../cmd/inboxctl").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w\n%s", err, out)
	}
	return dir, nil
})

// command returns a command running the named binary with an environment
// that names no config and no database: only the test's config does.
func command(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	dir, err := buildCommands()
	require.NoError(t, err)
	cmd := exec.Command(filepath.Join(dir, name), args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG=", "HOOKINBOX_DATABASE_URL=")
	return cmd
}

// run runs a binary to completion and returns its exit code and its
// standard output and error together.
func run(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	out, err := command(t, name, args...).CombinedOutput()
	var exitErr *exec.ExitError
	if err != nil {
		require.ErrorAs(t, err, &exitErr)
		return exitErr.ExitCode(), string(out)
	}
	return 0, string(out)
}

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	return path
}

// process is a running binary whose output the test reads line by line.
type process struct {
	cmd     *exec.Cmd
	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced when a line arrives
	exited  chan struct{}
	err     error // valid once exited is closed
}

// start runs the named binary with args in the background until the test
// ends.
func start(t *testing.T, name string, args ...string) *process {
	t.Helper()
	return startCmd(t, command(t, name, args...))
}

// startCmd runs cmd (from command) in the background until the test ends.
func startCmd(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = w, w
	require.NoError(t, cmd.Start())
	w.Close()
	p := &process{cmd: cmd, changed: make(chan struct{}), exited: make(chan struct{})}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
	}()
	go func() {
		p.err = cmd.Wait()
		<-read
		r.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	return p
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.lines, "\n")
}

// waitLine waits for an output line containing every one of subs and
// returns it; it fails when the process exits first or after a minute.
func (p *process) waitLine(t *testing.T, subs ...string) string {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		p.mu.Lock()
		lines, changed := p.lines, p.changed
		p.mu.Unlock()
	next:
		for _, line := range lines {
			for _, s := range subs {
				if !strings.Contains(line, s) {
					continue next
				}
			}
			return line
		}
		select {
		case <-changed:
		case <-p.exited:
			if len(p.lines) == len(lines) {
				t.Fatalf("exited (%v) before logging %q; output:\n%s", p.err, subs, p.log())
			}
		case <-deadline:
			t.Fatalf("no line with %q within a minute; output:\n%s", subs, p.log())
		}
	}
}

// addr is the address a daemon logged it listens on.
func (p *process) addr(t *testing.T, what string) string {
	t.Helper()
	m := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(p.waitLine(t, what+" listening"))
	require.NotNil(t, m)
	return m[1]
}

// terminate sends SIGTERM and returns the exit code.
func (p *process) terminate(t *testing.T) int {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatalf("still running a minute after SIGTERM; output:\n%s", p.log())
	}
	return p.cmd.ProcessState.ExitCode()
}

// get returns the status code of GET url.
func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// dbDoor is a TCP proxy in front of the test's PostgreSQL that turns every
// connection away until open is called: the test decides when the database
// "arrives".
type dbDoor struct {
	ln     net.Listener
	target string
	opened atomic.Bool
	mu     sync.Mutex
	conns  []net.Conn
}

// newDBDoor starts a closed door in front of dbURL's server and returns it
// with the URL that reaches the database through it.
func newDBDoor(t *testing.T, dbURL string) (*dbDoor, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	d := &dbDoor{ln: ln, target: u.Host}
	go d.serve()
	t.Cleanup(func() {
		ln.Close()
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, c := range d.conns {
			c.Close()
		}
	})
	u.Host = ln.Addr().String()
	return d, u.String()
}

// open forwards every later connection to the database server.
func (d *dbDoor) open() { d.opened.Store(true) }

func (d *dbDoor) serve() {
	for {
		c, err := d.ln.Accept()
		if err != nil {
			return
		}
		if !d.opened.Load() {
			c.Close()
			continue
		}
		up, err := net.Dial("tcp", d.target)
		if err != nil {
			c.Close()
			continue
		}
		d.mu.Lock()
		d.conns = append(d.conns, c, up)
		d.mu.Unlock()
		go func() { _, _ = io.Copy(up, c); up.Close() }()
		go func() { _, _ = io.Copy(c, up); c.Close() }()
	}
}
