package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// TestInboxctlEvents looks up a pending event (with its job) and one failed
// on arrival (without) through the binary, in both formats, and checks the
// exit status of each class of failure.
func TestInboxctlEvents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds inboxctl")
	}
	db := dbtest.New(t)
	ctx := context.Background()
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	ingester := inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{})
	_, err = ingester.Ingest(ctx, &inboxstore.Delivery{
		Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`), RequestID: "req-1",
		Events: []inboxstore.IncomingEvent{{ID: "ev_ok", Type: "account.deposit", Payload: []byte(`{"a":1}`)}},
	})
	require.NoError(t, err)
	_, err = ingester.Ingest(ctx, &inboxstore.Delivery{
		Source: "bank", Provider: "standardwebhooks", Body: []byte(`not json`), RequestID: "req-2",
		Events: []inboxstore.IncomingEvent{{ID: "ev_bad", Type: "account.deposit", ParseError: errors.New("invalid character 'o'")}},
	})
	require.NoError(t, err)
	path := writeConfig(t, daemonConfig(db.URL))

	t.Run("ShowText", func(t *testing.T) {
		t.Parallel()
		code, out := run(t, "inboxctl", "events", "show", "bank", "ev_ok", "--config", path)
		require.Equal(t, 0, code, out)
		require.Regexp(t, `(?m)^status: +pending$`, out)
		require.Regexp(t, `(?m)^request_id: +req-1$`, out)
		require.Regexp(t, `(?m)^job_id: +\d+$`, out)
		require.Regexp(t, `(?m)^job_state: +available$`, out)
	})

	t.Run("ShowJSON", func(t *testing.T) {
		t.Parallel()
		code, out := run(t, "inboxctl", "--config", path, "events", "show", "bank", "ev_bad", "--json")
		require.Equal(t, 0, code, out)
		var info inboxstore.EventInfo
		require.NoError(t, json.Unmarshal([]byte(out), &info), out)
		require.Equal(t, inbox.StatusFailed, info.Status)
		require.Equal(t, "req-2", info.RequestID)
		require.Equal(t, "unparseable delivery: invalid character 'o'", info.LastError)
		require.Nil(t, info.JobID, "failed on arrival: no job")
	})

	t.Run("ListTableAndJSON", func(t *testing.T) {
		t.Parallel()
		code, out := run(t, "inboxctl", "events", "list", "--status", "failed", "--since", "1h", "--config", path)
		require.Equal(t, 0, code, out)
		require.Regexp(t, `^ID +SOURCE +EVENT_ID +TYPE +STATUS +WAITING +ATTEMPTS +RECEIVED +JOB +JOB_STATE +REQUEST_ID +LAST_ERROR\n`, out)
		require.Contains(t, out, "ev_bad")
		require.NotContains(t, out, "ev_ok")

		code, out = run(t, "inboxctl", "events", "list", "--source", "bank", "--type", "account.deposit", "--json", "--config", path)
		require.Equal(t, 0, code, out)
		var infos []inboxstore.EventInfo
		require.NoError(t, json.Unmarshal([]byte(out), &infos), out)
		require.Len(t, infos, 2)
		require.Equal(t, "ev_bad", infos[0].EventID, "newest first")
		require.NotNil(t, infos[1].JobID)
		require.Equal(t, "available", infos[1].JobState)

		code, out = run(t, "inboxctl", "events", "list", "--source", "nosuch", "--json", "--config", path)
		require.Equal(t, 0, code, out)
		require.JSONEq(t, `[]`, out)
	})

	t.Run("ExitCodes", func(t *testing.T) {
		t.Parallel()
		for _, tt := range []struct {
			args []string
			code int
			says string
		}{
			{[]string{"events", "show", "bank", "ev_none"}, 1, `no event "ev_none" of source "bank"`},
			{[]string{"events", "show", "bank"}, 2, "accepts 2 arg(s)"},
			{[]string{"events", "list", "--status", "lost"}, 2, "--status must be pending, done or failed"},
			{[]string{"events", "list", "--since", "yesterday"}, 2, "--since must be"},
			{[]string{"events", "list", "--colour"}, 2, "unknown flag: --colour"},
			{[]string{"evnts"}, 2, `unknown command "evnts"`},
			{[]string{"events", "--help"}, 0, "inboxctl events [command]"},
			{[]string{"events", "list", "--help"}, 0, "--since string"},
			{[]string{"completion", "bash"}, 0, "bash completion"},
			{[]string{"send", "--data", "{}"}, 2, "send: --source is required"},
			{[]string{"send", "--source", "nope", "--data", "{}"}, 2, `send: unknown source "nope"`},
			{[]string{"send", "--source", "bank"}, 2, "send: --data is required"},
			{[]string{"send", "--source", "bank", "--data", "{}", "extra"}, 2, `send: unexpected argument "extra"`},
			{[]string{"send", "--colour"}, 2, "flag provided but not defined: -colour"},
		} {
			code, out := run(t, "inboxctl", append(tt.args, "--config", path)...)
			require.Equal(t, tt.code, code, "%q: %s", tt.args, out)
			require.Contains(t, out, tt.says, fmt.Sprint(tt.args))
		}
		unreachable := writeConfig(t, daemonConfig("postgres://postgres@127.0.0.1:1/postgres"))
		code, out := run(t, "inboxctl", "events", "list", "--config", unreachable)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "cannot reach PostgreSQL")
	})
}
