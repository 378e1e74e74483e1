package daemon_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/pgproxy"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/internal/webhook"
)

const secretValue = "whsec_c2VjcmV0LXRoYXQtbXVzdC1uZXZlci1sZWFr"

// daemonConfig is a config for both daemons on free ports.
func daemonConfig(dbURL string) string {
	return fmt.Sprintf(`
database: {url: %q}
receiver: {listen: "127.0.0.1:0"}
worker:
  listen: "127.0.0.1:0"
  routes: [{source: bank, handlers: [noop]}]
sources:
  - {name: bank, provider: standardwebhooks, secrets: [%q]}
`, dbURL, secretValue)
}

// postWebhook posts one signed delivery to the receiver at addr and returns
// the status code.
func postWebhook(t *testing.T, addr, eventID string) int {
	t.Helper()
	code, _ := postWebhookRetryAfter(t, addr, eventID)
	return code
}

// postWebhookRetryAfter posts one signed delivery to the receiver at addr
// and returns the status code and the Retry-After header.
func postWebhookRetryAfter(t *testing.T, addr, eventID string) (int, string) {
	t.Helper()
	body := `{"type":"account.deposit","data":{"account_id":"acc_1","amount":"1.00"}}`
	header, err := webhook.Headers(&webhook.Params{
		Provider: "standardwebhooks", Secret: secretValue, EventID: eventID, Time: time.Now(), Body: []byte(body),
	})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks/bank", strings.NewReader(body))
	require.NoError(t, err)
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

func TestDaemonsRefuseToStart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the daemons")
	}

	// Each daemon is refused for its own section's bad value, not the
	// other's.
	ownKey := map[string]string{"receiver": "receiver.ack_timeout", "worker": "worker.concurrency"}
	otherKey := map[string]string{"receiver": "worker.concurrency", "worker": "receiver.ack_timeout"}

	for _, name := range []string{"receiver", "worker"} {
		t.Run(name+"/BadValueIsNamed", func(t *testing.T) {
			t.Parallel()
			path := writeConfig(t, `
database: {url: "postgres://postgres@127.0.0.1:1/postgres"}
receiver: {ack_timeout: -4s}
worker: {concurrency: -1, routes: [{source: bank, handlers: [noop]}]}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["${BANK_SECRET}"]}
`)
			cmd := command(t, name, "--config", path)
			cmd.Env = append(cmd.Env, "BANK_SECRET="+secretValue)
			out, err := cmd.CombinedOutput()
			require.Error(t, err)
			require.Equal(t, 1, cmd.ProcessState.ExitCode(), string(out))
			require.Contains(t, string(out), ownKey[name])
			require.NotContains(t, string(out), otherKey[name])
			require.NotContains(t, string(out), secretValue)
		})

		t.Run(name+"/NothingToDoIsRefused", func(t *testing.T) {
			t.Parallel()
			code, out := run(t, name, "--config", writeConfig(t, `
database: {url: "postgres://postgres@127.0.0.1:1/postgres"}
`))
			require.Equal(t, 1, code, out)
			require.Contains(t, out, map[string]string{
				"receiver": "sources: the receiver needs at least one source",
				"worker":   "worker.routes: the worker needs at least one route",
			}[name])
		})

		t.Run(name+"/UnsetSecretVariableIsNamed", func(t *testing.T) {
			t.Parallel()
			code, out := run(t, name, "--config", writeConfig(t, `
database: {url: "postgres://postgres@127.0.0.1:1/postgres"}
sources:
  - {name: bank, provider: standardwebhooks, secrets: ["${HOOKINBOX_TEST_UNSET_SECRET}"]}
`))
			require.Equal(t, 1, code, out)
			if name == "worker" {
				// Refused for want of a route; the signing secrets are the
				// receiver's alone.
				require.NotContains(t, out, "HOOKINBOX_TEST_UNSET_SECRET")
				return
			}
			require.Contains(t, out, "sources[bank].secrets[0]")
			require.Contains(t, out, "HOOKINBOX_TEST_UNSET_SECRET")
		})

		t.Run(name+"/PoolLargerThanTheServerAllowsIsRefused", func(t *testing.T) {
			t.Parallel()
			db := dbtest.New(t)
			var maxConns int
			require.NoError(t, db.Pool.QueryRow(context.Background(),
				`SELECT current_setting('max_connections')::int`).Scan(&maxConns))
			cmd := command(t, name, "--config", writeConfig(t, daemonConfig(db.URL)))
			cmd.Env = append(cmd.Env, fmt.Sprintf("HOOKINBOX_DATABASE_MAX_CONNS=%d", maxConns+1))
			out, err := cmd.CombinedOutput()
			require.Error(t, err)
			require.Equal(t, 1, cmd.ProcessState.ExitCode(), string(out))
			require.Contains(t, string(out), fmt.Sprintf("database.max_conns is %d, but the server allows", maxConns+1))
			require.Contains(t, string(out), fmt.Sprintf("(max_connections %d less", maxConns))
		})

		t.Run(name+"/BadEnvironmentOverrideIsBlamedOnTheVariable", func(t *testing.T) {
			t.Parallel()
			cmd := command(t, name, "--config", writeConfig(t, daemonConfig("postgres://postgres@127.0.0.1:1/postgres")))
			cmd.Env = append(cmd.Env, "HOOKINBOX_RECEIVER_ACK_TIMEOUT=abc", "HOOKINBOX_WORKER_CONCURRENCY=lots")
			out, err := cmd.CombinedOutput()
			require.Error(t, err)
			require.Equal(t, 1, cmd.ProcessState.ExitCode(), string(out))
			own := map[string]string{"receiver": "HOOKINBOX_RECEIVER_ACK_TIMEOUT (receiver.ack_timeout)", "worker": "HOOKINBOX_WORKER_CONCURRENCY (worker.concurrency)"}[name]
			require.Contains(t, string(out), own)
			require.Equal(t, 1, strings.Count(string(out), own), "reported once, not again for the sources that inherit it")
		})
	}
}

// TestDaemonsWaitForTheDatabase starts each daemon while its database is
// out of reach (behind a closed proxy), checks it is alive but not ready,
// then lets the database arrive and checks it serves.
func TestDaemonsWaitForTheDatabase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the daemons")
	}

	t.Run("ReceiverAcceptsWebhooksOnceTheDatabaseArrives", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		door, doorURL := pgproxy.New(t, db.URL)
		p := start(t, "receiver", "--config", writeConfig(t, daemonConfig(doorURL)))
		addr := listenAddr(t, p, "receiver")
		p.WaitLine(t, "waiting for the database", `"attempt":1,`, `"retry_in":0.25`)

		// The door is closed: these hold until open below.
		require.Equal(t, http.StatusOK, get(t, "http://"+addr+"/healthz"))
		require.Equal(t, http.StatusServiceUnavailable, get(t, "http://"+addr+"/readyz"))
		require.Equal(t, http.StatusServiceUnavailable, postWebhook(t, addr, "msg_early"))

		door.Open()
		p.WaitLine(t, "receiver accepting webhooks")
		require.Equal(t, http.StatusOK, get(t, "http://"+addr+"/readyz"))
		require.Equal(t, http.StatusOK, postWebhook(t, addr, "msg_1"))
		// One line for the delivery, at info, with what it did.
		p.WaitLine(t, `"level":"info"`, `"msg":"delivery"`, `"source":"bank"`, `"outcome":"accepted"`, `"new":1,`, `"request_id":"`)
		var jobs int
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job`).Scan(&jobs))
		require.Equal(t, 1, jobs, "only the delivery after the database arrived was claimed")

		require.Equal(t, 0, p.Terminate(t), p.Log())
	})

	t.Run("WorkerWorksEventsOnceTheDatabaseArrives", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		door, doorURL := pgproxy.New(t, db.URL)
		config := daemonConfig(doorURL)

		// A receiver straight on the database enqueues one event.
		recv := start(t, "receiver", "--config", writeConfig(t, daemonConfig(db.URL)))
		recvAddr := listenAddr(t, recv, "receiver")
		recv.WaitLine(t, "receiver accepting webhooks")
		require.Equal(t, http.StatusOK, postWebhook(t, recvAddr, "msg_1"))

		p := start(t, "worker", "--config", writeConfig(t, config))
		addr := listenAddr(t, p, "worker")
		p.WaitLine(t, "waiting for the database", `"attempt":1,`)
		require.Equal(t, http.StatusOK, get(t, "http://"+addr+"/healthz"))
		require.Equal(t, http.StatusServiceUnavailable, get(t, "http://"+addr+"/readyz"))
		var state string
		require.NoError(t, db.Pool.QueryRow(context.Background(), `SELECT state FROM river_job`).Scan(&state))
		require.Equal(t, "available", state)

		door.Open()
		p.WaitLine(t, "worker started")
		require.Equal(t, http.StatusOK, get(t, "http://"+addr+"/readyz"))
		require.Eventually(t, func() bool {
			var now string
			err := db.Pool.QueryRow(context.Background(), `SELECT state FROM river_job`).Scan(&now)
			return err == nil && now == "completed"
		}, time.Minute, 10*time.Millisecond, "the event was not worked")

		require.Equal(t, 0, p.Terminate(t), p.Log())
		require.Equal(t, 0, recv.Terminate(t), recv.Log())
	})

	// serving is the line a daemon logs once it serves.
	serving := map[string]string{"receiver": "receiver accepting webhooks", "worker": "worker started"}
	for _, name := range []string{"receiver", "worker"} {
		t.Run(name+"/LogsEachAttemptAndStopsCleanlyWhileWaiting", func(t *testing.T) {
			t.Parallel()
			p := start(t, name, "--config", writeConfig(t, daemonConfig("postgres://postgres@127.0.0.1:1/postgres")))
			addr := listenAddr(t, p, name)
			p.WaitLine(t, "waiting for the database", `"attempt":1,`, `"retry_in":0.25`, "connection refused")
			p.WaitLine(t, "waiting for the database", `"attempt":2,`, `"retry_in":0.5`, "cannot reach PostgreSQL")
			require.Equal(t, http.StatusServiceUnavailable, get(t, "http://"+addr+"/readyz"))

			require.Equal(t, 0, p.Terminate(t), p.Log())
			require.Contains(t, p.Log(), "stopping before the database was ready")
		})

		t.Run(name+"/WaitsForInboxctlMigrate", func(t *testing.T) {
			t.Parallel()
			db := dbtest.NewEmpty(t)
			path := writeConfig(t, daemonConfig(db.URL))
			cmd := command(t, name, "--config", path)
			cmd.Env = append(cmd.Env, "HOOKINBOX_RECEIVER_LISEN=127.0.0.1:0")
			p := proctest.Start(t, cmd)
			addr := listenAddr(t, p, name)
			// Logged once the logger exists, before the database is reached.
			p.WaitLine(t, `"level":"warn"`, "HOOKINBOX_RECEIVER_LISEN matches no config key")
			p.WaitLine(t, `"level":"error"`, "database schema is too old",
				"the database has no hookinbox schema; run `inboxctl migrate --config "+path+"`")
			require.Equal(t, http.StatusServiceUnavailable, get(t, "http://"+addr+"/readyz"))

			code, out := run(t, "inboxctl", "migrate", "--config", path)
			require.Equal(t, 0, code, out)
			p.WaitLine(t, serving[name])
			require.Equal(t, http.StatusOK, get(t, "http://"+addr+"/readyz"))
			require.Equal(t, 0, p.Terminate(t), p.Log())
			require.NotContains(t, p.Log(), secretValue)
		})
	}
}
