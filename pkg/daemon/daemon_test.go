package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestReceiverAndWorkerFromConfig wires both daemons from one config, as
// the binaries do, and checks the whole promise: 50 concurrent identical
// deliveries give one row, one job and one handler run.
func TestReceiverAndWorkerFromConfig(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	cfg := &config.Config{
		Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)},
		Sources:  []config.SourceConfig{{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{secret}, Queue: "bank"}},
		Worker: config.WorkerConfig{
			Listen: "127.0.0.1:0", Queues: []string{"bank"}, Concurrency: 4,
			Config: worker.Config{Routes: []worker.Route{{Source: "bank", Types: []string{"account.*"}, Handlers: []string{"count"}}}},
		},
	}
	cfg.ApplyDefaults()
	require.NoError(t, cfg.Validate())
	env := &daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool}

	srv, stop, err := daemon.NewReceiver(env)
	require.NoError(t, err)
	t.Cleanup(stop) // runs after serveReceiver's shutdown: cleanups run last-in, first-out
	url := serveReceiver(t, srv)

	var runs atomic.Int64
	registry := worker.NewRegistry(env.Logger)
	registry.Register("count", func(context.Context, pgx.Tx, inbox.Event) error {
		runs.Add(1)
		return nil
	})
	w, err := daemon.NewWorker(env, registry)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, w.Stop(context.Background())) })

	body := `{"type":"account.deposit","data":{"account_id":"acc_1","amount":"1.00"}}`
	var wg sync.WaitGroup
	start := make(chan struct{})
	codes := make(chan int, 50)
	for i := range 50 {
		header, err := webhook.Headers(&webhook.Params{
			Provider: "standardwebhooks", Secret: secret, EventID: "msg_once",
			Time: time.Now().Add(-time.Duration(i) * time.Second), Body: []byte(body),
		})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/bank", strings.NewReader(body))
			req.Header = header
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	close(start)
	wg.Wait()
	close(codes)
	for code := range codes {
		require.Equal(t, http.StatusOK, code)
	}

	ctx := context.Background()
	store := inboxstore.New(db.Pool)
	waitFor(t, "the event to be done", func() bool {
		c, err := store.Count(ctx, &inboxstore.Filter{Source: "bank"})
		return err == nil && c.Done == 1
	})
	var jobs int
	var queue string
	rows, err := store.Count(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), min(queue) FROM river_job WHERE kind = $1`, inboxstore.JobKind).Scan(&jobs, &queue))
	require.Equal(t, inboxstore.Counts{Done: 1}, *rows)
	require.Equal(t, 1, jobs)
	require.Equal(t, "bank", queue, "the source's queue")
	require.EqualValues(t, 1, runs.Load())
}

func TestQueueFor(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Sources: []config.SourceConfig{{Name: "a", Queue: "qa"}, {Name: "b"}}}
	queueFor := daemon.QueueFor(cfg)
	require.Equal(t, "qa", queueFor("a"))
	require.Equal(t, "default", queueFor("b"))
	require.Equal(t, "default", queueFor("unknown"))
}

// serveReceiver serves srv's handler on a loopback port until the test ends and
// returns its base URL.
func serveReceiver(t *testing.T, srv *daemon.Receiver) string {
	t.Helper()
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts.URL
}

// TestConnectTimeout checks the bound on each connection attempt when
// database.url sets none: 10 s for one host, 2 s for each of several (a
// failover's multi-host URL, where a host that hangs costs every new
// connection that long before the next is tried), and the URL's own when it
// sets one. Boot does not connect.
func TestConnectTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want time.Duration
	}{
		{"postgres://u@db:5432/x", 10 * time.Second},
		{"postgres://u@db:5432/x?sslmode=prefer", 10 * time.Second},
		{"postgres://u@db1:5432,db2:5432/x?target_session_attrs=read-write", 2 * time.Second},
		{"host=db1,db2 port=5432,5433 user=u dbname=x", 2 * time.Second},
		{"postgres://u@db1:5432,db2:5432/x?connect_timeout=5", 5 * time.Second},
	} {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, fmt.Sprintf("database: {url: %q}\n", tc.url))
			env, _, err := daemon.Boot(context.Background(), &daemon.BootConfig{Args: []string{"--config", path}})
			require.NoError(t, err)
			defer env.Close()
			require.Equal(t, tc.want, env.Pool.Config().ConnConfig.ConnectTimeout)
		})
	}
}
