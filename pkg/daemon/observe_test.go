package daemon_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

const (
	uiUser     = "ops"
	uiPassword = "river-ui-test-password"
)

// observeBundle is a receiver and a worker wired from one config, as the
// binaries are, with River UI enabled, and a handler that fails the poison
// event while poisoned is set.
type observeBundle struct {
	db          *dbtest.DB
	env         *daemon.Env
	logs        *observer.ObservedLogs
	receiverURL string
	poisoned    atomic.Bool
	mu          sync.Mutex
	runs        map[string]int // handler runs by event id
}

func (b *observeBundle) runsOf(eventID string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runs[eventID]
}

func observeSetup(t *testing.T) *observeBundle {
	t.Helper()
	db := dbtest.New(t)
	cfg := &config.Config{
		Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)},
		Sources:  []config.SourceConfig{{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{secret}}},
		Worker: config.WorkerConfig{
			Listen: "127.0.0.1:0", Concurrency: 4,
			Config: worker.Config{MaxAttempts: 1, Routes: []worker.Route{{Source: "bank", Handlers: []string{"ledger"}}}},
			UI:     config.WorkerUIConfig{Enabled: true, BasicAuth: []config.BasicAuthConfig{{Username: uiUser, Password: uiPassword}}},
		},
	}
	cfg.ApplyDefaults()
	require.NoError(t, cfg.Validate())
	core, logs := observer.New(zap.InfoLevel)
	b := &observeBundle{db: db, logs: logs, runs: map[string]int{}}
	// A fresh reading of the database at every scrape.
	b.env = &daemon.Env{Config: cfg, Logger: zap.New(core), Pool: db.Pool, MetricsCache: time.Nanosecond}
	b.poisoned.Store(true)

	srv, stop, err := daemon.NewReceiver(b.env)
	require.NoError(t, err)
	t.Cleanup(stop)
	ts := httptest.NewServer(daemon.ReceiverHandler(b.env, srv))
	t.Cleanup(ts.Close)
	b.receiverURL = ts.URL
	return b
}

// startWorker starts the worker and serves what it serves on
// worker.listen; it returns the server's URL.
func (b *observeBundle) startWorker(t *testing.T) string {
	t.Helper()
	registry := newLedgerRegistry(b)
	w, err := daemon.NewWorker(b.env, registry)
	require.NoError(t, err)
	require.NoError(t, w.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, w.Stop(context.Background())) })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h, err := daemon.WorkerHandler(ctx, b.env, w)
	require.NoError(t, err)
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// deliver posts one signed delivery and returns the status code.
func (b *observeBundle) deliver(t *testing.T, source, signWith, eventID, eventType, requestID string) int {
	t.Helper()
	body := fmt.Sprintf(`{"type":%q,"data":{"account_id":"acc_1","amount":"1.00"}}`, eventType)
	header, err := webhook.Headers(&webhook.Params{
		Provider: "standardwebhooks", Secret: signWith, EventID: eventID, Time: time.Now(), Body: []byte(body),
	})
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, b.receiverURL+"/webhooks/"+source, strings.NewReader(body))
	require.NoError(t, err)
	req.Header = header
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// scrape fetches url's /metrics and parses it with Prometheus's own parser.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	return families
}

// sample returns the metric of family name whose labels are exactly
// labels, failing the test when there is none.
func sample(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	family, ok := families[name]
	require.True(t, ok, "no metric %s", name)
	for _, m := range family.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) == len(labels) {
			match := true
			for k, v := range labels {
				match = match && got[k] == v
			}
			if match {
				return m
			}
		}
	}
	require.Failf(t, "no sample", "%s%v", name, labels)
	return nil
}

func counter(t *testing.T, f map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	return sample(t, f, name, labels).GetCounter().GetValue()
}

func gauge(t *testing.T, f map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	return sample(t, f, name, labels).GetGauge().GetValue()
}

func histogramCount(t *testing.T, f map[string]*dto.MetricFamily, name string, labels map[string]string) uint64 {
	t.Helper()
	return sample(t, f, name, labels).GetHistogram().GetSampleCount()
}

// uiRequest sends a request to River UI, with the test's credentials when
// auth is set, and returns the status and body.
func uiRequest(t *testing.T, method, url, body string, auth bool) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if auth {
		req.SetBasicAuth(uiUser, uiPassword)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(data)
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 30*time.Second, 20*time.Millisecond, "timed out waiting: "+what)
}

type jobRow struct {
	state   string
	attempt int
}

func (b *observeBundle) job(t *testing.T, id int64) jobRow {
	t.Helper()
	var j jobRow
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), `SELECT state::text, attempt FROM river_job WHERE id = $1`, id).Scan(&j.state, &j.attempt))
	return j
}

func (b *observeBundle) row(t *testing.T, eventID string) (status string, attempts int, jobID int64, requestID string) {
	t.Helper()
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT status, attempts, coalesce((SELECT max(j.id) FROM river_job AS j WHERE j.kind = 'hookinbox.event' AND j.args @> jsonb_build_object('inbox_id', i.id)), 0), coalesce(request_id, '')
FROM webhook_inbox AS i WHERE source = 'bank' AND event_id = $1`, eventID).
		Scan(&status, &attempts, &jobID, &requestID))
	return status, attempts, jobID, requestID
}

// TestMetricsAndRiverUI runs a known load through a receiver and a worker
// and checks every count on /metrics, then inspects and replays the poison
// event through River UI's API.
func TestMetricsAndRiverUI(t *testing.T) {
	t.Parallel()
	b := observeSetup(t)
	bank := map[string]string{"source": "bank"}

	// The known load: 5 new events (one poison), 3 duplicates, 2 bad
	// signatures, 1 unknown source.
	for i := 1; i <= 4; i++ {
		require.Equal(t, http.StatusOK, b.deliver(t, "bank", secret, fmt.Sprintf("ev_%d", i), "account.deposit", ""))
	}
	require.Equal(t, http.StatusOK, b.deliver(t, "bank", secret, "ev_poison", "account.poison", "req-poison"))
	for i := 1; i <= 3; i++ {
		require.Equal(t, http.StatusOK, b.deliver(t, "bank", secret, fmt.Sprintf("ev_%d", i), "account.deposit", ""))
	}
	other := "whsec_" + strings.Repeat("A", 32)
	for i := 1; i <= 2; i++ {
		require.Equal(t, http.StatusUnauthorized, b.deliver(t, "bank", other, fmt.Sprintf("forged_%d", i), "account.deposit", ""))
	}
	require.Equal(t, http.StatusNotFound, b.deliver(t, "nosuch", secret, "ev_x", "account.deposit", ""))

	f := scrape(t, b.receiverURL)
	deliveries := "hookinbox_receiver_deliveries_total"
	require.InDelta(t, 8, counter(t, f, deliveries, map[string]string{"source": "bank", "outcome": "accepted", "reason": ""}), 0)
	require.InDelta(t, 2, counter(t, f, deliveries, map[string]string{"source": "bank", "outcome": "rejected", "reason": "signature"}), 0)
	require.InDelta(t, 1, counter(t, f, deliveries, map[string]string{"source": "", "outcome": "rejected", "reason": "unknown_source"}), 0,
		"an unknown source's name is not a label")
	require.InDelta(t, 5, counter(t, f, "hookinbox_receiver_events_total", map[string]string{"source": "bank", "outcome": "new"}), 0)
	require.InDelta(t, 3, counter(t, f, "hookinbox_receiver_events_total", map[string]string{"source": "bank", "outcome": "duplicate"}), 0)
	require.EqualValues(t, 8, histogramCount(t, f, "hookinbox_receiver_ack_duration_seconds", bank))
	batches := sample(t, f, "hookinbox_receiver_batch_events", map[string]string{}).GetHistogram()
	require.InDelta(t, 8, batches.GetSampleSum(), 0, "every accepted delivery's event went through one group transaction")
	require.Zero(t, gauge(t, f, "hookinbox_receiver_in_flight_requests", map[string]string{}))
	require.Zero(t, gauge(t, f, "hookinbox_receiver_batch_queue_deliveries", map[string]string{}))
	require.InDelta(t, 5, gauge(t, f, "hookinbox_inbox_backlog_events", map[string]string{"source": "bank", "status": "pending"}), 0)
	require.Positive(t, gauge(t, f, "hookinbox_inbox_oldest_pending_age_seconds", bank))
	require.InDelta(t, 5, gauge(t, f, "hookinbox_river_jobs", map[string]string{"queue": "default", "state": "available"}), 0)
	require.Contains(t, f, "go_goroutines")
	require.Contains(t, f, "process_cpu_seconds_total")

	workerURL := b.startWorker(t)
	store := inboxstore.New(b.db.Pool)
	events := "hookinbox_worker_events_total"
	// The worker counts a run after its row is settled, and the counter
	// after the run's histograms: five runs counted is the drain, observed.
	waitFor(t, "five runs counted", func() bool {
		total := 0.0
		for _, m := range scrape(t, workerURL)[events].GetMetric() {
			total += m.GetCounter().GetValue()
		}
		return total == 5
	})
	c, err := store.Count(context.Background(), nil)
	require.NoError(t, err)
	require.Equal(t, inboxstore.Counts{Done: 4, Failed: 1}, *c)

	f = scrape(t, workerURL)
	require.InDelta(t, 4, counter(t, f, events, map[string]string{"source": "bank", "outcome": "done"}), 0)
	require.InDelta(t, 1, counter(t, f, events, map[string]string{"source": "bank", "outcome": "failed"}), 0)
	require.EqualValues(t, 5, histogramCount(t, f, "hookinbox_worker_handler_duration_seconds", bank))
	require.EqualValues(t, 4, histogramCount(t, f, "hookinbox_worker_event_age_seconds", bank))
	require.Zero(t, gauge(t, f, "hookinbox_inbox_backlog_events", map[string]string{"source": "bank", "status": "pending"}), "the backlog falls to zero")
	require.InDelta(t, 1, gauge(t, f, "hookinbox_inbox_backlog_events", map[string]string{"source": "bank", "status": "failed"}), 0)
	require.NotContains(t, f, "hookinbox_inbox_oldest_pending_age_seconds", "no pending row, no age")

	// One request id through the pipeline: on the row, and on the worker's
	// line about the event.
	status, _, poisonJob, requestID := b.row(t, "ev_poison")
	require.Equal(t, "failed", status)
	require.Equal(t, "req-poison", requestID)
	failedLines := b.logs.FilterMessage("event failed after its last attempt").All()
	require.Len(t, failedLines, 1)
	require.Equal(t, "req-poison", failedLines[0].ContextMap()["request_id"])

	t.Run("RiverUIWantsCredentials", func(t *testing.T) {
		t.Parallel()
		for _, path := range []string{"/riverui/", "/riverui/api/jobs?state=discarded"} {
			code, _ := uiRequest(t, http.MethodGet, workerURL+path, "", false)
			require.Equal(t, http.StatusUnauthorized, code, path)
			code, _ = uiRequest(t, http.MethodGet, workerURL+path, "", true)
			require.Equal(t, http.StatusOK, code, path)
		}
		req, err := http.NewRequest(http.MethodGet, workerURL+"/riverui/", nil)
		require.NoError(t, err)
		req.SetBasicAuth(uiUser, "wrong")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		require.Equal(t, http.StatusOK, get(t, workerURL+"/metrics"), "/metrics stays open")
		require.Equal(t, http.StatusOK, get(t, workerURL+"/healthz"))
	})

	t.Run("ReadOnlyRefusesRetry", func(t *testing.T) {
		t.Parallel()
		cfg := *b.env.Config
		cfg.Worker.UI.ReadOnly = true
		env := &daemon.Env{Config: &cfg, Logger: zap.NewNop(), Pool: b.db.Pool}
		w, err := daemon.NewWorker(env, newLedgerRegistry(b))
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		h, err := daemon.WorkerHandler(ctx, env, w)
		require.NoError(t, err)
		ts := httptest.NewServer(h)
		t.Cleanup(ts.Close)
		code, _ := uiRequest(t, http.MethodPost, ts.URL+"/riverui/api/jobs/retry", fmt.Sprintf(`{"ids":["%d"]}`, poisonJob), true)
		require.Equal(t, http.StatusForbidden, code)
		code, _ = uiRequest(t, http.MethodGet, ts.URL+"/riverui/api/jobs?state=discarded", "", true)
		require.Equal(t, http.StatusOK, code)
	})

	t.Run("CrossSiteRetryIsRefused", func(t *testing.T) {
		t.Parallel()
		// What a browser sends when another site's page posts to River UI
		// with the operator's cached credentials.
		req, err := http.NewRequest(http.MethodPost, workerURL+"/riverui/api/jobs/retry", strings.NewReader(`{"ids":["1"]}`))
		require.NoError(t, err)
		req.SetBasicAuth(uiUser, uiPassword)
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	})

	// The poison event's job is in River UI with its error and args, and
	// retrying it there reprocesses the failed row, once. Retrying a done
	// row's job then changes nothing.
	// River finalizes a failed job after the worker returns.
	waitFor(t, "the poison job discarded", func() bool { return b.job(t, poisonJob).state == "discarded" })
	code, body := uiRequest(t, http.MethodGet, workerURL+"/riverui/api/jobs?state=discarded", "", true)
	require.Equal(t, http.StatusOK, code)
	var list struct {
		Data []struct {
			ID   json.Number `json:"id"`
			Args string      `json:"args"`
		} `json:"data"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &list), body)
	require.Len(t, list.Data, 1, body)
	require.Equal(t, fmt.Sprint(poisonJob), list.Data[0].ID.String())
	var args map[string]any
	require.NoError(t, json.Unmarshal([]byte(list.Data[0].Args), &args))
	require.Equal(t, map[string]any{
		"inbox_id": args["inbox_id"], "source": "bank", "event_id": "ev_poison", "event_type": "account.poison", "request_id": "req-poison",
	}, args, "the args carry the event's identity, never its payload")
	code, body = uiRequest(t, http.MethodGet, fmt.Sprintf("%s/riverui/api/jobs/%d", workerURL, poisonJob), "", true)
	require.Equal(t, http.StatusOK, code)
	var job struct {
		Errors []struct {
			Error string `json:"error"`
		} `json:"errors"`
	}
	require.NoError(t, json.Unmarshal([]byte(body), &job), body)
	require.Len(t, job.Errors, 1, body)
	require.Equal(t, errPoison.Error(), job.Errors[0].Error, "the job's error is the handler's")

	require.Equal(t, 1, b.runsOf("ev_poison"))
	b.poisoned.Store(false)
	code, body = uiRequest(t, http.MethodPost, workerURL+"/riverui/api/jobs/retry", fmt.Sprintf(`{"ids":["%d"]}`, poisonJob), true)
	require.Equal(t, http.StatusOK, code, body)
	waitFor(t, "the retried poison job", func() bool { return b.job(t, poisonJob).state == "completed" })
	status, attempts, _, _ := b.row(t, "ev_poison")
	require.Equal(t, "done", status)
	require.Equal(t, 2, attempts)
	require.Equal(t, 2, b.runsOf("ev_poison"), "the replay ran the handler once more")

	_, attempts, doneJob, _ := b.row(t, "ev_1")
	before := b.job(t, doneJob)
	require.Equal(t, "completed", before.state)
	code, body = uiRequest(t, http.MethodPost, workerURL+"/riverui/api/jobs/retry", fmt.Sprintf(`{"ids":["%d"]}`, doneJob), true)
	require.Equal(t, http.StatusOK, code, body)
	// The retry made the job available again; completed with one more
	// attempt means it ran.
	waitFor(t, "the retried done job", func() bool {
		j := b.job(t, doneJob)
		return j.state == "completed" && j.attempt == before.attempt+1
	})
	status, after, _, _ := b.row(t, "ev_1")
	require.Equal(t, "done", status)
	require.Equal(t, attempts, after, "the done row was not processed again")
	require.Equal(t, 1, b.runsOf("ev_1"))
}

var errPoison = errors.New("poisoned ledger entry")

// newLedgerRegistry registers "ledger", which counts its runs and fails the
// poison event while b.poisoned is set.
func newLedgerRegistry(b *observeBundle) *worker.Registry {
	registry := worker.NewRegistry(b.env.Logger)
	registry.Register("ledger", func(_ context.Context, _ pgx.Tx, ev inbox.Event) error {
		b.mu.Lock()
		b.runs[ev.EventID]++
		b.mu.Unlock()
		if ev.EventType == "account.poison" && b.poisoned.Load() {
			return errPoison
		}
		return nil
	})
	return registry
}
