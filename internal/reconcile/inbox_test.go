package reconcile_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/providerapi"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
)

// inbox is a real receiver, built from config as cmd/receiver builds it and
// serving HTTP on loopback, on a database of the test's own, with the
// claim reconciliation uses.
type inbox struct {
	db       *dbtest.DB
	cfg      *config.Config
	url      string
	store    *inboxstore.Store
	ingester *inboxstore.Ingester
}

func setupInbox(t *testing.T, sources ...config.SourceConfig) *inbox {
	t.Helper()
	for i := range sources {
		// What is stored is checked here, not speed.
		sources[i].AckTimeout = time.Minute
	}
	db := dbtest.New(t)
	cfg := &config.Config{Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)}, Sources: sources}
	cfg.ApplyDefaults()
	srv, stop, err := daemon.NewReceiver(&daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool})
	require.NoError(t, err)
	t.Cleanup(stop) // after the server's Close: cleanups run last-in, first-out
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	client, err := river.NewClient(riverpgxv5.New(db.Pool), &river.Config{})
	require.NoError(t, err)
	return &inbox{
		db: db, cfg: cfg, url: ts.URL, store: inboxstore.New(db.Pool),
		ingester: inboxstore.NewIngester(db.Pool, client, &inboxstore.IngesterConfig{}),
	}
}

// post delivers a webhook to source, which must accept it.
func (in *inbox) post(t *testing.T, source string, header http.Header, body []byte) {
	t.Helper()
	status, err := providerapi.Deliver(in.url+"/webhooks/"+source, header, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
}

// parser returns source's verifier as reconciliation keys with it.
func (in *inbox) parser(t *testing.T, source string) reconcile.EventParser {
	t.Helper()
	for i := range in.cfg.Sources {
		if s := &in.cfg.Sources[i]; s.Name == source {
			p, err := reconcile.Parser(s.Provider, s.ProviderConfig())
			require.NoError(t, err)
			return p
		}
	}
	t.Fatalf("no source %q", source)
	return nil
}

// eventIDs returns source's stored event ids, sorted.
func (in *inbox) eventIDs(t *testing.T, source string) []string {
	t.Helper()
	infos, err := in.store.List(context.Background(), &inboxstore.ListParams{Source: source, Limit: 1000})
	require.NoError(t, err)
	ids := make([]string, len(infos))
	for i, info := range infos {
		ids[i] = info.EventID
	}
	slices.Sort(ids)
	return ids
}

// jobs counts the event jobs enqueued.
func (in *inbox) jobs(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, in.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1`, inboxstore.JobKind).Scan(&n))
	return n
}

// waits records the fetchers' waits instead of sleeping.
type waits struct{ got []time.Duration }

func (w *waits) sleep(_ context.Context, d time.Duration) error {
	w.got = append(w.got, d)
	return nil
}

// counts is res without its list of missing events (see missingIDs).
func counts(res *reconcile.Result) *reconcile.Result {
	c := *res
	c.Missing = nil
	return &c
}

// missingIDs are the ids of res's missing events, in the order listed.
func missingIDs(res *reconcile.Result) []string {
	ids := make([]string, len(res.Missing))
	for i, m := range res.Missing {
		ids[i] = m.ID
	}
	return ids
}
