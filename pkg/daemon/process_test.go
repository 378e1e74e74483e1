package daemon_test

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// command returns a command running the named binary (cmd/receiver,
// cmd/worker or cmd/inboxctl, built once per test run) with an environment
// that names no config and no database: only the test's config does.
func command(t *testing.T, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(proctest.Build(t, "../../cmd/"+name)[0], args...)
	cmd.Env = append(os.Environ(), "DATABASE_URL=", "HOOKINBOX_CONFIG=", "HOOKINBOX_DATABASE_URL=")
	return cmd
}

// run runs a binary to completion and returns its exit code and its
// standard output and error together.
func run(t *testing.T, name string, args ...string) (int, string) {
	t.Helper()
	return proctest.Run(t, command(t, name, args...))
}

// writeConfig writes a config file and returns its path.
func writeConfig(t *testing.T, config string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(config), 0o600))
	return path
}

// start runs the named binary with args in the background until the test
// ends.
func start(t *testing.T, name string, args ...string) *proctest.Process {
	t.Helper()
	return proctest.Start(t, command(t, name, args...))
}

// listenAddr is the address a daemon (what: receiver or worker) logged it
// listens on.
func listenAddr(t *testing.T, p *proctest.Process, what string) string {
	t.Helper()
	m := regexp.MustCompile(`"addr":"([^"]+)"`).FindStringSubmatch(p.WaitLine(t, what+" listening"))
	require.NotNil(t, m)
	return m[1]
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
