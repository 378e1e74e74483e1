package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/providerapi"
)

const (
	reconcileKey    = "rk_test_inboxctl_reconcile"
	reconcileSecret = "whsec_inboxctl_reconcile"
	squareHook      = "https://hooks.example.com/webhooks/square"
)

// reconciled is a source reconciled against a fake of its provider's API,
// with a receiver on loopback, all configured from one file.
type reconciled struct {
	db     *dbtest.DB
	config string
	source string
	// missing are the ids (GitHub: guids) the webhooks did not bring, in
	// the order the provider lists them.
	missing []string
	// requests returns the requests the fake was sent (Stripe: their
	// queries; GitHub: "METHOD /path?query"; nil for the others).
	requests func() []string
}

// writeReconcileConfig writes a config of source (of provider) whose
// reconciliation asks apiURL, and of a slack source "plain", on
// databaseURL, and returns its path.
func writeReconcileConfig(t *testing.T, databaseURL, source, provider, apiURL string) string {
	t.Helper()
	own, reconcile := "", ""
	switch provider {
	case "square":
		own = fmt.Sprintf("url: %q,", squareHook) // what Square signs
	case "github":
		reconcile = "hook: repos/octo/hello/hooks/1"
	}
	yaml := fmt.Sprintf(`database: {url: %q}
log: {level: warn}
sources:
  - {name: %s, provider: %s, secrets: [%q], %s
     reconcile: {enabled: true, api_key: %s, api_base_url: %q, %s}}
  - {name: plain, provider: slack, secrets: [plain_secret]}
worker:
  routes: [{source: %s, handlers: [log]}, {source: plain, handlers: [log]}]
`, databaseURL, source, provider, reconcileSecret, own, reconcileKey, apiURL, reconcile, source)
	path := filepath.Join(t.TempDir(), "hookinbox.yaml")
	require.NoError(t, os.WriteFile(path, []byte(yaml), 0o600))
	return path
}

// post delivers a webhook through the receiver, which must accept it.
func post(t *testing.T, url string, header http.Header, body []byte) {
	t.Helper()
	status, err := providerapi.Deliver(url, header, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, status)
}

// setupReconciled builds a source of provider whose API lists six events
// (GitHub: deliveries) of the last hour, of which the webhooks brought
// three, and one of three hours ago, outside the window the tests list.
func setupReconciled(t *testing.T, provider string) *reconciled {
	t.Helper()
	db := dbtest.New(t)
	now := time.Now()
	ago := func(m int) time.Time { return now.Add(-time.Duration(m) * time.Minute) }
	delivered := func(i int) bool { return i%2 == 0 } // 0, 2, 4 came; 1, 3, 5 were missed
	r := &reconciled{db: db, source: provider}
	api := &http.ServeMux{}
	server := httptest.NewServer(api)
	t.Cleanup(server.Close)
	r.config = writeReconcileConfig(t, db.URL, provider, provider, server.URL)
	receiver := serveReceiver(t, r.config, db).URL + "/webhooks/" + provider

	switch provider {
	case "stripe":
		fake := &providerapi.Stripe{Key: reconcileKey}
		fake.Events = append(fake.Events, providerapi.NewStripeEvent("evt_old", "invoice.paid", ago(180), "in_old"))
		for i := range 6 {
			ev := providerapi.NewStripeEvent(fmt.Sprintf("evt_%d", i), "invoice.paid", ago(50-i*5), fmt.Sprintf("in_%d", i))
			fake.Events = slices.Insert(fake.Events, 0, ev) // newest first
			if delivered(i) {
				body, err := json.Marshal(ev)
				require.NoError(t, err)
				post(t, receiver, http.Header{"Stripe-Signature": {sign.Stripe(reconcileSecret, time.Now(), body)}, "Content-Type": {"application/json"}}, body)
			} else {
				r.missing = append([]string{ev.ID}, r.missing...) // listed newest first
			}
		}
		api.Handle("/", fake)
		r.requests = func() []string { return slices.Clone(fake.Requests) }
	case "paddle":
		fake := &providerapi.Paddle{Key: reconcileKey}
		for i := 5; i >= 0; i-- { // newest first
			fake.Events = append(fake.Events, providerapi.NewPaddleEvent(i+2, ago(50-i*5)))
		}
		fake.Events = append(fake.Events, providerapi.NewPaddleEvent(1, ago(180)))
		for i, ev := range fake.Events[:6] {
			if delivered(5 - i) {
				body, header := ev.Webhook(t, reconcileSecret)
				post(t, receiver, header, body)
			} else {
				r.missing = append(r.missing, ev.EventID)
			}
		}
		api.Handle("/", fake)
		r.requests = func() []string { return slices.Clone(fake.Requests) }
	case "square":
		fake := &providerapi.Square{Token: reconcileKey}
		fake.Events = append(fake.Events, providerapi.NewSquareEvent(100, ago(180)))
		for i := range 6 { // oldest first
			fake.Events = append(fake.Events, providerapi.NewSquareEvent(i, ago(50-i*5)))
		}
		for i, ev := range fake.Events[1:] {
			if delivered(i) {
				body, header := ev.Webhook(t, reconcileSecret, squareHook)
				post(t, receiver, header, body)
			} else {
				r.missing = append(r.missing, ev.EventID)
			}
		}
		api.Handle("/", fake)
	case "github":
		fake := providerapi.NewGitHub("/repos/octo/hello/hooks/1", receiver, reconcileSecret, providerapi.Bearer(reconcileKey))
		fake.Add("g_old", ago(180), false, http.StatusBadGateway)
		for i := range 6 {
			guid := fmt.Sprintf("g%d", i)
			fake.Add(guid, ago(50-i*5), false, map[bool]int{true: http.StatusOK, false: http.StatusBadGateway}[delivered(i)])
			if delivered(i) {
				post(t, receiver, fake.Headers(guid, fake.Payloads[guid]), fake.Payloads[guid])
			} else {
				r.missing = append([]string{guid}, r.missing...) // listed newest first
			}
		}
		api.Handle("/", fake)
		r.requests = func() []string { return slices.Clone(fake.Requests) }
	}
	return r
}

// state is what a dry run must not change: the source's rows, its event
// jobs and its watermark.
func (r *reconciled) state(t *testing.T) string {
	t.Helper()
	var s string
	require.NoError(t, r.db.Pool.QueryRow(context.Background(), `
SELECT (SELECT string_agg(event_id || ':' || status, ',' ORDER BY event_id) FROM webhook_inbox WHERE source = $1) || '|' ||
       (SELECT count(*) FROM river_job) || '|' ||
       coalesce((SELECT reconciled_until::text FROM hookinbox_reconcile_watermark WHERE source = $1), 'none')`, r.source).Scan(&s))
	return s
}

// eventIDs are the source's stored event ids, sorted.
func (r *reconciled) eventIDs(t *testing.T) []string {
	t.Helper()
	rows, err := r.db.Pool.Query(context.Background(), `SELECT event_id FROM webhook_inbox WHERE source = $1 ORDER BY event_id`, r.source)
	require.NoError(t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

// listed reads the event ids of a run's lines that start with action.
func listed(stdout, action string) []string {
	var ids []string
	for line := range strings.SplitSeq(stdout, "\n") {
		if rest, ok := strings.CutPrefix(line, action+" "); ok {
			ids = append(ids, strings.Fields(rest)[0])
		}
	}
	return ids
}

// TestReconcileEveryProvider is issue 42's point 3 through inboxctl, for
// every provider reconciliation knows: a dry run lists exactly the events
// the webhooks missed and changes nothing; a run claims them (GitHub: has
// them redelivered through the receiver) once; a second finds nothing.
func TestReconcileEveryProvider(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{"stripe", "paddle", "square", "github"} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			r := setupReconciled(t, provider)
			require.Len(t, r.missing, 3)
			verb, did := "claim", "claimed"
			if provider == "github" {
				verb, did = "redeliver", "redelivered"
			}
			before := r.state(t)

			code, stdout, stderr := inboxctl(t, "--config", r.config, "reconcile", provider, "--since", "1h", "--dry-run")
			require.Zero(t, code, stderr)
			t.Logf("inboxctl reconcile %s --since 1h --dry-run:\n%s", provider, stdout)
			require.Equal(t, r.missing, listed(stdout, "would "+verb), stdout)
			require.Contains(t, stdout, " listed, 3 missing from the inbox, 3 already in it\n")
			require.Contains(t, stdout, "dry run: nothing claimed or redelivered")
			require.Equal(t, before, r.state(t), "a dry run changes nothing")
			if provider == "github" {
				require.Empty(t, slices.DeleteFunc(r.requests(), func(s string) bool { return strings.HasPrefix(s, "GET ") }),
					"a dry run asks for no redelivery")
			}

			code, stdout, stderr = inboxctl(t, "--config", r.config, "reconcile", provider, "--since", "1h")
			require.Zero(t, code, stderr)
			t.Logf("inboxctl reconcile %s --since 1h:\n%s", provider, stdout)
			require.Equal(t, r.missing, listed(stdout, did), stdout)
			require.Contains(t, stdout, "watermark moved to ")
			ids := r.eventIDs(t)
			require.Len(t, ids, 6, "the three missed events are in the inbox now: %v", ids)
			for _, id := range r.missing {
				require.Contains(t, ids, id)
			}
			var jobs int
			require.NoError(t, r.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job WHERE kind = $1`, inboxstore.JobKind).Scan(&jobs))
			require.Equal(t, 6, jobs, "one job per event, none twice")

			code, stdout, stderr = inboxctl(t, "--config", r.config, "reconcile", provider, "--since", "1h")
			require.Zero(t, code, stderr)
			require.Empty(t, listed(stdout, did), stdout)
			require.Contains(t, stdout, " listed, 0 missing from the inbox, 6 already in it\n")
			require.Len(t, r.eventIDs(t), 6)
		})
	}
}

// TestReconcileSharesTheJobsLock holds the lock the scheduled job takes
// for a source while inboxctl reconcile runs: the run refuses, changing
// nothing, and a dry run, which takes no lock, still lists.
func TestReconcileSharesTheJobsLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := setupReconciled(t, "stripe")
	tx, err := r.db.Pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	var got bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(x'7265636f'::int, hashtext('stripe'))`).Scan(&got))
	require.True(t, got)
	before := r.state(t)

	code, _, stderr := inboxctl(t, "--config", r.config, "reconcile", "stripe", "--since", "1h")
	require.Equal(t, exitOperational, code)
	require.Equal(t, "inboxctl: stripe is being reconciled now (the worker's scheduled run, or another inboxctl reconcile); try again when it has finished\n", stderr)
	require.Equal(t, before, r.state(t))

	code, stdout, stderr := inboxctl(t, "--config", r.config, "reconcile", "stripe", "--since", "1h", "--dry-run")
	require.Zero(t, code, stderr)
	require.Equal(t, r.missing, listed(stdout, "would claim"))

	require.NoError(t, tx.Rollback(ctx))
	code, stdout, stderr = inboxctl(t, "--config", r.config, "reconcile", "stripe", "--since", "1h")
	require.Zero(t, code, stderr)
	require.Equal(t, r.missing, listed(stdout, "claimed"))
}

// TestReconcileWindow: --until bounds what is listed, and a run whose
// window does not cover the scheduled run's leaves the watermark.
func TestReconcileWindow(t *testing.T) {
	t.Parallel()
	r := setupReconciled(t, "stripe")
	until := time.Now().Add(-40 * time.Minute).UTC().Format(time.RFC3339)
	code, stdout, stderr := inboxctl(t, "--config", r.config, "reconcile", "stripe", "--since", "1h", "--until", until)
	require.Zero(t, code, stderr)
	// evt_1 (45 minutes ago) of the missed ones; evt_3 and evt_5 are later.
	require.Equal(t, []string{"evt_1"}, listed(stdout, "claimed"), stdout)
	require.Contains(t, stdout, "watermark left as it was")
	require.True(t, strings.HasSuffix(r.state(t), "|none"), "no watermark: %s", r.state(t))
	require.Contains(t, r.requests()[0], "created%5Blte%5D=")

	// No listing reaches before what Stripe keeps, 30 days.
	code, stdout, stderr = inboxctl(t, "--config", r.config, "reconcile", "stripe", "--since", "2000h", "--dry-run")
	require.Zero(t, code, stderr)
	first, _, _ := strings.Cut(strings.TrimPrefix(stdout, "stripe: listed from "), " ")
	from, err := time.Parse(time.RFC3339, first)
	require.NoError(t, err, stdout)
	require.WithinDuration(t, time.Now().Add(-720*time.Hour), from, time.Minute)
}

// TestReconcileRefusesAWrongSource: an unknown source, or one whose
// provider has no reconciliation, fails with a clear message.
func TestReconcileRefusesAWrongSource(t *testing.T) {
	t.Parallel()
	path := writeReconcileConfig(t, dbtest.New(t).URL, "stripe", "stripe", "http://127.0.0.1:1")
	for _, tt := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"nosuch"}, exitOperational, `inboxctl: no source "nosuch" in the config (sources: stripe, plain)` + "\n"},
		{[]string{"plain"}, exitOperational, `inboxctl: source "plain": provider slack has no reconciliation (providers with one: github, paddle, square, stripe)` + "\n"},
		{[]string{"stripe", "--since", "yesterday"}, exitUsage, "--since must be a duration"},
		{[]string{}, exitUsage, "accepts 1 arg(s)"},
	} {
		code, _, stderr := inboxctl(t, append([]string{"--config", path, "reconcile"}, tt.args...)...)
		require.Equal(t, tt.code, code, "%v: %s", tt.args, stderr)
		require.Contains(t, stderr, tt.says)
	}
}
