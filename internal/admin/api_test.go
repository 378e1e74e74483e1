package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/admin"
	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/inbox"
)

const token = "admin-token-for-tests-0123456789"

type bundle struct {
	db     *dbtest.DB
	url    string
	client *river.Client[pgx.Tx]
}

func setup(t *testing.T) *bundle {
	t.Helper()
	db := dbtest.New(t)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	queueFor := func(string) string { return river.QueueDefault }
	a, err := admin.New(db.Pool, &admin.Config{Sources: []admin.Source{{Name: "bank", Provider: "standardwebhooks"}}, Client: client, QueueFor: queueFor})
	require.NoError(t, err)
	h, err := a.Handler(token, nil)
	require.NoError(t, err)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	_, err = inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}).Ingest(context.Background(), &inboxstore.Delivery{
		Source: "bank", Provider: "standardwebhooks", Body: []byte(`{}`),
		Events: []inboxstore.IncomingEvent{{ID: "evt_1", Type: "account.deposit", Payload: []byte(`{}`)}},
	})
	require.NoError(t, err)
	return &bundle{db: db, url: srv.URL, client: client}
}

func (b *bundle) do(t *testing.T, method, path, auth string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, b.url+path, nil)
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

func TestAdminAPI(t *testing.T) {
	t.Parallel()

	t.Run("RefusesAMissingOrWrongToken", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		routes := [][2]string{
			{"GET", "/admin/v1/stats"}, {"GET", "/admin/v1/sources"}, {"GET", "/admin/v1/events"},
			{"GET", "/admin/v1/events/bank/evt_1"}, {"POST", "/admin/v1/events/bank/evt_1/replay"},
			{"POST", "/admin/v1/sources/bank/pause"}, {"POST", "/admin/v1/sources/bank/resume"},
			{"GET", "/admin/v1/sources/bank/rejections"}, {"GET", "/admin/v1/nosuch"},
			{"GET", "/admin/v1/events/bank/evt_1/verify"},
		}
		for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Bearer " + token + "x", "Bearer " + token[:len(token)-1],
			"bearer " + token, "Basic " + token, token} {
			for _, r := range routes {
				code, body := b.do(t, r[0], r[1], auth)
				require.Equal(t, http.StatusUnauthorized, code, "%s %s with %q", r[0], r[1], auth)
				require.Contains(t, body, "bearer token is required")
			}
		}
		// Nothing was changed by the refused calls.
		var paused int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM hookinbox_source_pause`).Scan(&paused))
		require.Zero(t, paused)
	})

	t.Run("NeverServedWithoutAToken", func(t *testing.T) {
		t.Parallel()
		db := dbtest.New(t)
		client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
		require.NoError(t, err)
		a, err := admin.New(db.Pool, &admin.Config{Client: client, QueueFor: func(string) string { return "default" }})
		require.NoError(t, err)
		_, err = a.Handler("", nil)
		require.ErrorIs(t, err, admin.ErrNoToken)
	})

	t.Run("ServesTheOperatorActions", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		auth := "Bearer " + token
		code, body := b.do(t, "GET", "/admin/v1/events/bank/evt_1", auth)
		require.Equal(t, http.StatusOK, code, body)
		var info inboxstore.EventInfo
		require.NoError(t, json.Unmarshal([]byte(body), &info))
		require.Equal(t, inbox.StatusPending, info.Status)

		code, body = b.do(t, "POST", "/admin/v1/events/bank/evt_1/replay", auth)
		require.Equal(t, http.StatusConflict, code, "a pending event is not replayed: %s", body)
		_, err := b.db.Pool.Exec(context.Background(), `UPDATE webhook_inbox SET status = 'failed', last_error = 'boom'`)
		require.NoError(t, err)
		code, body = b.do(t, "POST", "/admin/v1/events/bank/evt_1/replay", auth)
		require.Equal(t, http.StatusOK, code, body)
		require.NoError(t, json.Unmarshal([]byte(body), &info))
		require.Equal(t, inbox.StatusPending, info.Status)
		var jobs int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job`).Scan(&jobs))
		require.Equal(t, 2, jobs, "the replay enqueued a new job; the row was not copied")

		// Without the sources' secrets nothing can be verified; the answer
		// says so (pkg/daemon's TestEventsVerify verifies real deliveries).
		code, body = b.do(t, "GET", "/admin/v1/events/bank/evt_1/verify", auth)
		require.Equal(t, http.StatusOK, code, body)
		var v admin.Verification
		require.NoError(t, json.Unmarshal([]byte(body), &v))
		require.Equal(t, admin.VerifyFailed, v.Result)
		require.Contains(t, v.Reason, "needs the sources' secrets")
		code, body = b.do(t, "GET", "/admin/v1/events/bank/nosuch/verify", auth)
		require.Equal(t, http.StatusNotFound, code, body)

		code, body = b.do(t, "GET", "/admin/v1/events/bank/nosuch", auth)
		require.Equal(t, http.StatusNotFound, code, body)
		code, body = b.do(t, "POST", "/admin/v1/sources/bank/pause", auth)
		require.Equal(t, http.StatusOK, code, body)
		code, body = b.do(t, "POST", "/admin/v1/sources/nosuch/pause", auth)
		require.Equal(t, http.StatusNotFound, code, body)
		code, body = b.do(t, "GET", "/admin/v1/stats", auth)
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `"paused":[{"source":"bank"`)
		code, body = b.do(t, "POST", "/admin/v1/sources/bank/resume", auth)
		require.Equal(t, http.StatusOK, code, body)
		code, body = b.do(t, "POST", "/admin/v1/sources/bank/resume", auth)
		require.Equal(t, http.StatusConflict, code, body)
		code, body = b.do(t, "GET", "/admin/v1/events?status=bogus", auth)
		require.Equal(t, http.StatusBadRequest, code, body)
	})
}
