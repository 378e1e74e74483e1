package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/webhook"
)

// TestThroughPgBouncer runs inboxctl, the receiver and the worker binaries
// through PgBouncer in transaction pooling mode, with each query mode that
// works there, and checks the promise: duplicate deliveries claim one row
// and one job, and every event's handler runs once. The processes' pools,
// each larger than the server's max_connections, share PgBouncer's 20
// server connections, one transaction at a time.
func TestThroughPgBouncer(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binaries behind PgBouncer")
	}
	bouncer := dbtest.StartPgBouncer(t)

	for _, mode := range []string{"exec", "simple_protocol", "cache_describe"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t)
			// A pool larger than the server allows, which behind a
			// transaction pooler is no error: PgBouncer bounds the server's
			// connections.
			var maxConns int
			require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT current_setting('max_connections')::int`).Scan(&maxConns))
			path := writeConfig(t, fmt.Sprintf(`
database: {url: %q, pooler: transaction, query_mode: %s, max_conns: %d}
receiver: {listen: "127.0.0.1:0"}
worker:
  listen: "127.0.0.1:0"
  concurrency: 16
  fetch_poll_interval: 200ms
  routes: [{source: bank, handlers: [log]}]
sources:
  - {name: bank, provider: standardwebhooks, secrets: [%q]}
`, bouncer.URL(t, db), mode, maxConns+1, secretValue))

			code, out := run(t, "inboxctl", "migrate", "--config", path)
			require.Equal(t, 0, code, out)
			require.Contains(t, out, "schema is up to date")

			recv := start(t, "receiver", "--config", path)
			addr := listenAddr(t, recv, "receiver")
			recv.WaitLine(t, "receiver accepting webhooks")
			work := start(t, "worker", "--config", path)
			work.WaitLine(t, "worker started")

			// 50 copies of one delivery and 100 distinct ones, all at once.
			const distinct = 100
			ids := make([]string, 0, 50+distinct)
			for range 50 {
				ids = append(ids, "msg_dup")
			}
			for i := range distinct {
				ids = append(ids, fmt.Sprintf("msg_%03d", i))
			}
			codes := deliverAll(t, addr, ids)
			for i, code := range codes {
				require.Equal(t, http.StatusOK, code, ids[i])
			}

			ctx := context.Background()
			store := inboxstore.New(db.Pool)
			work.WaitUntil(t, time.Minute, func() bool {
				c, err := store.Count(ctx, &inboxstore.Filter{Source: "bank"})
				return err == nil && c.Done == distinct+1
			})
			// Stopped, the worker has flushed River's completions and said
			// all it will.
			recv.Stop(t)
			work.Stop(t)
			counts, err := store.Count(ctx, nil)
			require.NoError(t, err)
			require.Equal(t, inboxstore.Counts{Done: distinct + 1}, *counts, "one row per event, every one done")
			var jobs, completed, retried int
			require.NoError(t, db.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'completed'),
count(*) FILTER (WHERE attempt <> 1) FROM river_job WHERE kind = $1`, inboxstore.JobKind).Scan(&jobs, &completed, &retried))
			require.Equal(t, distinct+1, jobs, "one job per event")
			require.Equal(t, distinct+1, completed)
			require.Zero(t, retried, "no job failed an attempt through PgBouncer")

			// Every handler run logs a line: one per event.
			runs := regexp.MustCompile(`"msg":"event".*"event_id":"(msg_[0-9a-z]+)"`).FindAllStringSubmatch(work.Log(), -1)
			perEvent := map[string]int{}
			for _, m := range runs {
				perEvent[m[1]]++
			}
			require.Len(t, perEvent, distinct+1)
			for id, n := range perEvent {
				require.Equal(t, 1, n, "handler runs of %s", id)
			}
			require.Contains(t, bouncer.Process.Log(), "login attempt: db="+db.Name, "the processes reached the database through PgBouncer")
		})
	}
}

// deliverAll posts one signed delivery per event id to the receiver at
// addr, all at once, and returns the status codes in order (0 for a
// transport error, which fails the test).
func deliverAll(t *testing.T, addr string, ids []string) []int {
	t.Helper()
	body := `{"type":"account.deposit","data":{"account_id":"acc_1","amount":"1.00"}}`
	reqs := make([]*http.Request, len(ids))
	for i, id := range ids {
		header, err := webhook.Headers(&webhook.Params{
			Provider: "standardwebhooks", Secret: secretValue, EventID: id, Time: time.Now(), Body: []byte(body),
		})
		require.NoError(t, err)
		reqs[i], err = http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/bank", strings.NewReader(body))
		require.NoError(t, err)
		reqs[i].Header = header
	}
	codes := make([]int, len(ids))
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() {
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("deliver %s: %v", ids[i], err)
				return
			}
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	return codes
}
