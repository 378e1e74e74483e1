package receiver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

// e2eBundle is a receiver built from config exactly as cmd/receiver builds
// it, serving real HTTP on loopback, on a database of the test's own.
type e2eBundle struct {
	db  *dbtest.DB
	url string
}

// setupE2E starts a receiver for sources. Unset fields take the defaults
// (and provider presets) that config.Load would apply, except the ack
// timeout: these tests check what is stored and answered, not speed, and a
// busy CI machine under -race must not turn them into 503s. (Ack timeouts
// are tested in receiver_test.go, presets in pkg/config.)
func setupE2E(t *testing.T, sources ...config.SourceConfig) *e2eBundle {
	t.Helper()
	for i := range sources {
		if sources[i].AckTimeout == 0 {
			sources[i].AckTimeout = time.Minute
		}
	}
	db := dbtest.New(t)
	cfg := &config.Config{Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)}, Sources: sources}
	cfg.ApplyDefaults()
	env := &daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool}
	srv, stop, err := daemon.NewReceiver(env)
	require.NoError(t, err)
	t.Cleanup(stop) // runs after serve's shutdown: cleanups run last-in, first-out
	return &e2eBundle{db: db, url: serve(t, srv)}
}

// jobCount counts River's jobs.
func (b *e2eBundle) jobCount(t *testing.T) int {
	t.Helper()
	_, jobs := rowCounts(t, b.db)
	return jobs
}

// e2eReply is the receiver's answer.
type e2eReply struct {
	Status int
	Header http.Header
	Body   []byte
}

// counts decodes a default 200 body.
func (r e2eReply) counts(t *testing.T) map[string]int {
	t.Helper()
	var c map[string]int
	require.NoError(t, json.Unmarshal(r.Body, &c), "body %q", r.Body)
	return c
}

func (b *e2eBundle) post(t *testing.T, source string, header http.Header, body []byte) e2eReply {
	t.Helper()
	r, err := b.tryPost(source, header, body)
	require.NoError(t, err)
	return r
}

// tryPost is post for goroutines other than the test's, which must not
// call require: it returns what went wrong instead.
func (b *e2eBundle) tryPost(source string, header http.Header, body []byte) (e2eReply, error) {
	req, err := http.NewRequest(http.MethodPost, b.url+"/webhooks/"+source, bytes.NewReader(body))
	if err != nil {
		return e2eReply{}, err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return e2eReply{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return e2eReply{}, err
	}
	return e2eReply{Status: resp.StatusCode, Header: resp.Header, Body: raw}, nil
}

// e2eRow is an inbox row as the end-to-end tests check it.
type e2eRow struct {
	EventID, EventType, TwinKey, Status, LastError string
	HasJob                                         bool
}

// rows returns the inbox rows in insertion order.
func (b *e2eBundle) rows(t *testing.T) []e2eRow {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `
SELECT event_id, event_type, coalesce(twin_key, ''), status, coalesce(last_error, ''),
       EXISTS (SELECT 1 FROM river_job j WHERE j.kind = 'hookinbox.event' AND j.args @> jsonb_build_object('inbox_id', i.id))
FROM webhook_inbox i ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var out []e2eRow
	for rows.Next() {
		var r e2eRow
		require.NoError(t, rows.Scan(&r.EventID, &r.EventType, &r.TwinKey, &r.Status, &r.LastError, &r.HasJob))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}
