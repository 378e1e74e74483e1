package daemon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap/zaptest"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
	"github.com/hookinbox/hookinbox/internal/testkit/tracingtest"
	"github.com/hookinbox/hookinbox/internal/tracing"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/daemon"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// traceBundle is a receiver and a worker wired from one config, as the
// binaries are, whose handler records the span context it is given.
type traceBundle struct {
	db          *dbtest.DB
	env         *daemon.Env
	receiverURL string
	worker      *worker.Worker

	mu      sync.Mutex
	handled map[string]trace.SpanContext // the handler's span, by event id
}

// traceSetup builds the bundle. The receiver commits deliveries in pairs:
// its one flusher waits (up to a minute) for a second delivery, so that
// two deliveries sent together commit in one group transaction. tp, when
// set, is the daemons' tracer provider; otherwise tracing follows tc.
func traceSetup(t *testing.T, tp trace.TracerProvider, tc tracing.Config) *traceBundle {
	t.Helper()
	db := dbtest.New(t)
	cfg := &config.Config{
		Database: config.DatabaseConfig{URL: config.SecretURL(db.URL)},
		Receiver: config.ReceiverConfig{BatcherConfig: inboxstore.BatcherConfig{MaxEvents: 2, MaxWait: time.Minute, Flushers: 1}},
		Sources:  []config.SourceConfig{{Name: "bank", Provider: "standardwebhooks", Secrets: []config.Secret{secret}, AckTimeout: time.Minute}},
		Worker: config.WorkerConfig{
			Listen: "127.0.0.1:0", Concurrency: 4,
			Config: worker.Config{Routes: []worker.Route{{Source: "bank", Handlers: []string{"record"}}}},
		},
		Tracing: tc,
	}
	cfg.ApplyDefaults()
	require.NoError(t, cfg.Validate())
	b := &traceBundle{db: db, handled: map[string]trace.SpanContext{}}
	b.env = &daemon.Env{Config: cfg, Logger: zaptest.NewLogger(t), Pool: db.Pool, Name: "test", TracerProvider: tp}
	return b
}

// start starts the receiver and the worker.
func (b *traceBundle) start(t *testing.T) {
	t.Helper()
	srv, stop, err := daemon.NewReceiver(b.env)
	require.NoError(t, err)
	t.Cleanup(stop)
	ts := httptest.NewServer(daemon.ReceiverHandler(b.env, srv))
	t.Cleanup(ts.Close)
	b.receiverURL = ts.URL

	registry := worker.NewRegistry(b.env.Logger)
	registry.Register("record", func(ctx context.Context, _ pgx.Tx, ev inbox.Event) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.handled[ev.EventID] = trace.SpanContextFromContext(ctx)
		return nil
	})
	b.worker, err = daemon.NewWorker(b.env, registry)
	require.NoError(t, err)
	require.NoError(t, b.worker.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, b.worker.Stop(context.Background())) })
}

// deliverTogether posts one signed delivery per event id at once, each
// with the request id "req-<id>", and requires each answer to be 200.
func (b *traceBundle) deliverTogether(t *testing.T, eventIDs ...string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(eventIDs))
	for _, id := range eventIDs {
		wg.Go(func() {
			body := fmt.Sprintf(`{"type":"account.deposit","data":{"account_id":"acc_1","amount":"1.00","id":%q}}`, id)
			header, err := webhook.Headers(&webhook.Params{
				Provider: "standardwebhooks", Secret: secret, EventID: id, Time: time.Now(), Body: []byte(body),
			})
			if err != nil {
				errs <- err
				return
			}
			req, err := http.NewRequest(http.MethodPost, b.receiverURL+"/webhooks/bank", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			req.Header = header
			req.Header.Set("X-Request-Id", "req-"+id)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Errorf("%s: status %d", id, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// waitDone waits until the events' rows are done.
func (b *traceBundle) waitDone(t *testing.T, eventIDs ...string) {
	t.Helper()
	waitFor(t, "events done", func() bool {
		var n int
		require.NoError(t, b.db.Pool.QueryRow(context.Background(),
			`SELECT count(*) FROM webhook_inbox WHERE status = 'done' AND event_id = ANY($1)`, eventIDs).Scan(&n))
		return n == len(eventIDs)
	})
}

// jobMetadata returns the metadata of each event's job, by event id.
func (b *traceBundle) jobMetadata(t *testing.T) map[string]map[string]any {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT args->>'event_id', metadata FROM river_job WHERE kind = $1`, inboxstore.JobKind)
	require.NoError(t, err)
	out := map[string]map[string]any{}
	for rows.Next() {
		var id string
		var metadata []byte
		require.NoError(t, rows.Scan(&id, &metadata))
		var m map[string]any
		require.NoError(t, json.Unmarshal(metadata, &m))
		require.NotContains(t, out, id, "one job per event")
		out[id] = m
	}
	require.NoError(t, rows.Err())
	return out
}

// spans are the spans an in-memory exporter holds.
type spans []tracetest.SpanStub

func (s spans) named(name string) spans {
	var out spans
	for _, span := range s {
		if span.Name == name {
			out = append(out, span)
		}
	}
	return out
}

func (s spans) with(key, value string) spans {
	var out spans
	for _, span := range s {
		for _, kv := range span.Attributes {
			if string(kv.Key) == key && kv.Value.String() == value {
				out = append(out, span)
			}
		}
	}
	return out
}

func (s spans) childrenOf(parent trace.SpanContext) spans {
	var out spans
	for _, span := range s {
		if span.Parent.TraceID() == parent.TraceID() && span.Parent.SpanID() == parent.SpanID() {
			out = append(out, span)
		}
	}
	return out
}

func attr(span tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range span.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func linksTo(span tracetest.SpanStub, sc trace.SpanContext) bool {
	for _, l := range span.Links {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() {
			return true
		}
	}
	return false
}

// TestTracingFollowsEachDeliveryThroughItsJob sends two deliveries that the
// receiver commits in one group transaction, then a duplicate of one with a
// new delivery: each delivery has a trace of its own, the claim's trace
// context is in its own job's metadata, and the worker's spans of the job
// and of its handlers link to that delivery's claim; the duplicate has its
// span in the receiver and no second handler span.
func TestTracingFollowsEachDeliveryThroughItsJob(t *testing.T) {
	t.Parallel()

	exporter := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter), sdktrace.WithSampler(tracing.Sampler(1)))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	b := traceSetup(t, tp, tracing.Config{})
	b.start(t)

	b.deliverTogether(t, "evt_a", "evt_b")
	// received_at is the claim transaction's now(): one value, one
	// transaction. (xmin would not do: the worker, already running, may
	// have taken one of the rows, which rewrites it.)
	var commits int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(),
		`SELECT count(DISTINCT received_at) FROM webhook_inbox WHERE event_id IN ('evt_a', 'evt_b')`).Scan(&commits))
	require.Equal(t, 1, commits, "the two deliveries committed in one group transaction")
	b.deliverTogether(t, "evt_a", "evt_c") // evt_a again: a duplicate
	b.waitDone(t, "evt_a", "evt_b", "evt_c")
	waitFor(t, "every span ended", func() bool {
		all := spans(exporter.GetSpans())
		return len(all.named("hookinbox.receive")) == 4 && len(all.named("hookinbox.handle")) == 3 && len(all.named("river.work")) >= 3
	})
	all := spans(exporter.GetSpans())

	receives := all.named("hookinbox.receive")
	traces := map[trace.TraceID]bool{}
	for _, r := range receives {
		traces[r.SpanContext.TraceID()] = true
		require.Equal(t, "bank", attr(r, "hookinbox.source").AsString())
		require.Equal(t, "standardwebhooks", attr(r, "hookinbox.provider").AsString())
		require.Equal(t, int64(http.StatusOK), attr(r, "http.response.status_code").AsInt64())
		for _, kv := range r.Attributes {
			require.NotContains(t, kv.Value.String(), secret)
			require.NotContains(t, kv.Value.String(), "acc_1", "no body in a span")
		}
	}
	require.Len(t, traces, 4, "each delivery is a trace of its own")

	metadata := b.jobMetadata(t)
	require.Len(t, metadata, 3)
	claims := map[string]trace.SpanContext{}
	for _, id := range []string{"evt_a", "evt_b", "evt_c"} {
		r := receives.with("hookinbox.request_id", "req-"+id)
		if id == "evt_a" {
			r = r.with("hookinbox.outcome", "new")
		}
		require.Len(t, r, 1, id)
		require.Equal(t, "new", attr(r[0], "hookinbox.outcome").AsString(), id)
		require.Equal(t, int64(1), attr(r[0], "hookinbox.events.new").AsInt64(), id)
		claim := all.named("hookinbox.claim").childrenOf(r[0].SpanContext)
		require.Len(t, claim, 1, "%s: the claim is inside the request's span", id)
		claims[id] = claim[0].SpanContext

		// The delivery's own trace context is in its job's metadata.
		require.Equal(t, fmt.Sprintf("00-%s-%s-01", claim[0].SpanContext.TraceID(), claim[0].SpanContext.SpanID()),
			metadata[id]["traceparent"], id)

		handle := all.named("hookinbox.handle").with("hookinbox.event_id", id)
		require.Len(t, handle, 1, "%s: one handler span", id)
		h := handle[0]
		require.Equal(t, "done", attr(h, "hookinbox.outcome").AsString(), id)
		require.Equal(t, "bank", attr(h, "hookinbox.source").AsString(), id)
		require.Equal(t, "account.deposit", attr(h, "hookinbox.event_type").AsString(), id)
		require.True(t, linksTo(h, claims[id]), "%s: the handler's span links to the delivery's claim", id)
		jobs := all.named("river.work")
		var job *tracetest.SpanStub
		for i := range jobs {
			if jobs[i].SpanContext.SpanID() == h.Parent.SpanID() {
				job = &jobs[i]
			}
		}
		require.NotNil(t, job, "%s: the handler's span is its job's child", id)
		require.Equal(t, job.SpanContext.TraceID(), h.SpanContext.TraceID(), id)
		require.True(t, linksTo(*job, claims[id]), "%s: the job's span links to the delivery's claim", id)

		b.mu.Lock()
		require.Equal(t, h.SpanContext, b.handled[id], "%s: the handler runs in its span", id)
		b.mu.Unlock()
	}
	require.NotEqual(t, claims["evt_a"].TraceID(), claims["evt_b"].TraceID())

	// The duplicate: a span in the receiver, no job, no second handler.
	dup := receives.with("hookinbox.request_id", "req-evt_a").with("hookinbox.outcome", "duplicate")
	require.Len(t, dup, 1)
	require.Equal(t, int64(1), attr(dup[0], "hookinbox.events.duplicates").AsInt64())
	require.Equal(t, int64(0), attr(dup[0], "hookinbox.events.new").AsInt64())

	// Each group transaction's span links to the claims it committed.
	commits2 := all.named("hookinbox.commit")
	require.Len(t, commits2, 2)
	for _, c := range commits2 {
		require.Equal(t, int64(2), attr(c, "hookinbox.deliveries").AsInt64())
		require.Len(t, c.Links, 2)
		require.False(t, c.Parent.IsValid(), "a group belongs to none of its deliveries")
		require.Len(t, all.named("river.insert_many").childrenOf(c.SpanContext), 1, "the jobs' insert is inside the group's span")
	}
	require.True(t, linksTo(commits2[0], claims["evt_a"]) || linksTo(commits2[1], claims["evt_a"]))
	require.True(t, linksTo(commits2[0], claims["evt_b"]) && linksTo(commits2[0], claims["evt_a"]) ||
		linksTo(commits2[1], claims["evt_b"]) && linksTo(commits2[1], claims["evt_a"]), "evt_a and evt_b share a group")
}

// TestTracingOffMakesNoSpan runs the daemons with tracing off but an
// endpoint configured: no exporter sends anything, the jobs carry no trace
// context, and the handlers get no span.
func TestTracingOffMakesNoSpan(t *testing.T) {
	t.Parallel()

	collector := tracingtest.NewCollector(t)
	b := traceSetup(t, nil, tracing.Config{Enabled: false, OTLPEndpoint: config.SecretURL(collector.URL + "/v1/traces")})
	stop, err := daemon.StartTracing(context.Background(), b.env)
	require.NoError(t, err)
	require.Nil(t, b.env.TracerProvider, "no provider, no exporter")
	b.start(t)
	b.deliverTogether(t, "evt_a", "evt_b")
	b.waitDone(t, "evt_a", "evt_b")
	require.NoError(t, b.worker.Stop(context.Background()))
	stop()

	for id, m := range b.jobMetadata(t) {
		require.NotContains(t, m, "traceparent", id)
	}
	b.mu.Lock()
	for id, sc := range b.handled {
		require.False(t, sc.IsValid(), "%s: no span", id)
	}
	require.Len(t, b.handled, 2)
	b.mu.Unlock()
	require.Empty(t, collector.Requests())
}

// TestTracingExportsWithOTLP runs the daemons with tracing on, exporting
// to a fake collector: the receiver's and the worker's spans arrive there
// over OTLP/HTTP, with the configured header.
func TestTracingExportsWithOTLP(t *testing.T) {
	t.Parallel()

	collector := tracingtest.NewCollector(t)
	b := traceSetup(t, nil, tracing.Config{
		Enabled: true, OTLPEndpoint: config.SecretURL(collector.URL + "/v1/traces"), Headers: map[string]config.Secret{"authorization": "Bearer otlp-test"},
	})
	stop, err := daemon.StartTracing(context.Background(), b.env)
	require.NoError(t, err)
	require.NotNil(t, b.env.TracerProvider)
	b.start(t)
	b.deliverTogether(t, "evt_a", "evt_b")
	b.waitDone(t, "evt_a", "evt_b")
	require.NoError(t, b.worker.Stop(context.Background())) // every job's span has ended
	stop()                                                  // exports what is buffered

	names := collector.Spans()
	for _, name := range []string{"hookinbox.receive", "hookinbox.claim", "hookinbox.commit", "river.insert_many", "river.work", "hookinbox.handle"} {
		require.Contains(t, names, name)
	}
	for _, r := range collector.Requests() {
		require.Equal(t, "/v1/traces", r.Path)
		require.Equal(t, "Bearer otlp-test", r.Header.Get("Authorization"))
		require.Equal(t, []string{"hookinbox-test"}, r.Services)
	}
}
