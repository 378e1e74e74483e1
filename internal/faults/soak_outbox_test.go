package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/natstest"
)

// The outbox side of the soak (issue 40): every deposit the ledger applies
// writes an account.credited message to two destinations in its
// transaction (examples/ledger's notify, the routes' destinations), an
// HTTP feed the soak runs on 127.0.0.1 and a NATS JetStream stream of the
// soak's own, and the relays of the soak's workers deliver them, as the
// product runs them, under the soak's faults, feed outages and handlers
// that fail after their send. The promises (checkOutbox): no message of a
// run that did not commit is ever delivered, every message of a committed
// run is delivered, and the stream holds a message twice only as JetStream
// documents it (a re-send later than its duplicate window).

const (
	stepFeedDown  stepKind = "feeddown"  // from its next delivery on, the feed answers 503 (Retry-After: 1) for Picks[0] ms
	stepFeedCrash stepKind = "feedcrash" // PostgreSQL crashes as the feed receives a message for the first time, then starts
)

// The destinations, as the workers' config names them.
const (
	soakFeed   = "feed"
	soakStream = "stream"
)

// soakFeedSecret signs the relay's deliveries to the feed.
const soakFeedSecret = "whsec_ZmVlZHNlY3JldGZlZWRzZWNyZXRmZWVkc2Vj"

// soakRelayLease is worker.outbox.relay.lease: a relay's claim that a kill
// or a lost mark leaves unmarked is sent again this long after it, within
// the schedule or early in the tail rather than 2 minutes (the default)
// later; the stream's duplicate window is then 2 minutes (the least the
// product gives it), far longer than a re-send takes.
const soakRelayLease = 20 * time.Second

// afterSendPrefix names the accounts whose deposits fail their first
// attempt after both messages were enqueued and the first inserted
// (soakOutboxTrigger): a run that rolls back with messages in its
// transaction. The second attempt commits.
const afterSendPrefix = "acc_oflaky_"

// soakOutboxTrigger stamps every message with a value of its own
// (soak_run, a random UUID added to the JSON payload), so that each run's
// message differs from any other run's of the same event and key: a
// delivered payload that is not the committed row's is a run that did not
// commit (rolled back, or lost in a crash). It stamps it too with the WAL
// position of its insert (soak_lsn), which precedes its run's commit
// record: the feed checks, as it receives the message, that the server
// has flushed its WAL past it. And it fails the first attempt of
// afterSendPrefix's deposits at their second message.
var soakOutboxTrigger = fmt.Sprintf(`
CREATE FUNCTION soak_outbox_run() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.payload := convert_to((convert_from(NEW.payload, 'UTF8')::jsonb || jsonb_build_object(
        'soak_run', gen_random_uuid()::text, 'soak_lsn', pg_current_wal_insert_lsn()::text))::text, 'UTF8');
    RETURN NEW;
END $$;
CREATE TRIGGER soak_outbox_run BEFORE INSERT ON hookinbox_outbox FOR EACH ROW EXECUTE FUNCTION soak_outbox_run();
CREATE FUNCTION soak_after_send() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.destination = '%s' AND convert_from(NEW.payload, 'UTF8')::jsonb->>'account_id' LIKE '%s%%'
       AND (SELECT attempts FROM webhook_inbox WHERE source = NEW.source AND event_id = NEW.event_id) < 2 THEN
        RAISE EXCEPTION 'soak: a handler fails after its outbox send';
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER soak_after_send AFTER INSERT ON hookinbox_outbox FOR EACH ROW EXECUTE FUNCTION soak_after_send();`,
	soakStream, afterSendPrefix)

// soakOutbox is the outbox side's state in a soak: the feed, what it
// received, and the stream.
type soakOutbox struct {
	pool           *pgxpool.Pool // the soak's
	feed           *httptest.Server
	natsURL        string
	stream, prefix string

	mu       sync.Mutex
	crash    func()              // armed by feedCrash: called at the next first receipt of a message
	fired    chan struct{}       // closed when crash was called
	crashes  int                 // feedCrash steps, and of them
	onFirst  int                 // those whose crash came at a first receipt
	early    string              // the first message received before its run was flushed, and the WAL positions
	downNext time.Duration       // an outage that begins at the next delivery, armed by feedDown
	down     int                 // outages in progress
	received map[string][][]byte // the feed's 2xx deliveries: key → bodies, in order
	refused  int                 // deliveries answered 503
	outages  int
}

// startOutbox starts the feed, picks the NATS server (natstest.Required:
// the soak fails, saying why, when there is none) and the stream's name
// (deleted when the soak ends), and adds soakOutboxTrigger.
func startOutbox(s *soak) *soakOutbox {
	o := &soakOutbox{pool: s.pool, received: map[string][][]byte{}}
	o.natsURL = natstest.Required(s.t)
	o.stream, o.prefix = natstest.Stream(s.t, o.natsURL)
	o.feed = httptest.NewServer(http.HandlerFunc(o.serve))
	s.t.Cleanup(o.feed.Close)
	_, err := s.pool.Exec(context.Background(), soakOutboxTrigger)
	require.NoError(s.t, err)
	return o
}

// serve is the feed: it records each delivery by its webhook-id (the
// message's key) and answers 200, or 503 with Retry-After: 1 during an
// outage (one feedDown armed begins with this delivery). Before it answers, it checks that the message's run is durable:
// the server's WAL flushed past the message's insert (soak_lsn). The
// relay's claim, which commits durably after the run, makes it so before
// the message leaves; a flushed position only moves forward, so a check
// that comes late can miss a message sent too early, never blame one sent
// in time. (The check is skipped while the server is down.)
func (o *soakOutbox) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.checkFlushed(r.Header.Get("webhook-id"), body)
	o.mu.Lock()
	defer o.mu.Unlock()
	if d := o.downNext; d > 0 {
		o.downNext = 0
		o.down++
		o.outages++
		time.AfterFunc(d, func() { // the schedule's fault lasts d
			o.mu.Lock()
			o.down--
			o.mu.Unlock()
		})
	}
	if o.down > 0 {
		o.refused++
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	key := r.Header.Get("webhook-id")
	first := len(o.received[key]) == 0
	o.received[key] = append(o.received[key], body)
	if first && o.crash != nil {
		o.crash()
		o.crash = nil
		o.onFirst++
		close(o.fired)
	}
}

// checkFlushed notes the first message received whose insert's WAL
// position (soak_lsn) the server has not flushed yet.
func (o *soakOutbox) checkFlushed(key string, body []byte) {
	var p struct {
		LSN string `json:"soak_lsn"`
	}
	if json.Unmarshal(body, &p) != nil || p.LSN == "" {
		return // not a stamped message: promise 2 names it
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var flushed string
	var durable bool
	if o.pool.QueryRow(ctx, `SELECT pg_current_wal_flush_lsn()::text, pg_current_wal_flush_lsn() >= $1::pg_lsn`, p.LSN).Scan(&flushed, &durable) != nil {
		return // the server is down (a crash of the schedule's)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if !durable && o.early == "" {
		o.early = fmt.Sprintf("the feed received %s before its run was durable: inserted at WAL %s, flushed to %s", key, p.LSN, flushed)
	}
}

// feedCrash crashes PostgreSQL the moment the feed receives a message for
// the first time: SIGQUIT to the postmaster, an immediate stop (what is
// not in the WAL on disk is gone), sent from the feed's handler before it
// answers; then starts it again (pgRestartBy, whose promise holds here
// too). The message's run committed with synchronous_commit = off, and
// the relay's claim, which commits durably after it, is what made the run
// durable before the message left: a claim that did not would let the
// crash lose a run whose message was delivered. With no first receipt
// within 10 s, it crashes PostgreSQL all the same.
func (s *soak) feedCrash(ctx context.Context) {
	o := s.out
	s.pgRestartBy(ctx, func() {
		pid, _, ok := s.ops.cluster.pidFile()
		require.True(s.t, ok, "the server's postmaster.pid")
		quit := func() { _ = syscall.Kill(pid, syscall.SIGQUIT) }
		o.mu.Lock()
		o.crashes++
		o.crash, o.fired = quit, make(chan struct{})
		fired := o.fired
		o.mu.Unlock()
		select {
		case <-fired:
		case <-time.After(10 * time.Second): // a bound: traffic runs throughout
			o.mu.Lock()
			if o.crash != nil {
				o.crash = nil
				quit()
			}
			o.mu.Unlock()
		}
		deadline := time.Now().Add(time.Minute)
		for syscall.Kill(pid, 0) == nil {
			require.True(s.t, time.Now().Before(deadline), "PostgreSQL still up a minute after SIGQUIT")
			<-time.After(20 * time.Millisecond) // polling a condition with a deadline
		}
	})
}

// workerKeys are the worker: keys of the destinations and the relay's
// lease, for soakWorkerKeys' line.
func (o *soakOutbox) workerKeys() string {
	return fmt.Sprintf(`
  destinations:
    %s: {kind: http, url: %q, secret: %q}
    %s: {kind: nats, url: %q, stream: %q, subject: "%s.{source}.{type}", subjects: ["%s.>"], create_stream: true}
  outbox: {relay: {lease: %s}}`, soakFeed, o.feed.URL+"/credited", soakFeedSecret,
		soakStream, o.natsURL, o.stream, o.prefix, o.prefix, soakRelayLease)
}

// soakRouteDestinations are the routes' destinations, in flow style after
// a route's handlers.
const soakRouteDestinations = ", destinations: [" + soakFeed + ", " + soakStream + "]"

// feedDown makes the feed answer 503 for d from its next delivery on, so
// that the outage refuses one delivery at least (one still armed when the
// next comes is replaced).
func (o *soakOutbox) feedDown(d time.Duration) {
	o.mu.Lock()
	o.downNext = d
	o.mu.Unlock()
}

// addOutboxSteps adds the outbox side's steps to s, from a generator of
// their own: a feed outage of 1 to 3 s every 6 to 12 s, a PostgreSQL
// crash at a first receipt (feedCrash) every 40 to 60 s, and every 5 to
// 10 s a send on the first source of 3 to 6 deposits that fail after
// their send (afterSendPrefix), each on an account of its own.
func addOutboxSteps(s *schedule) {
	rng := rand.New(rand.NewPCG(s.Seed, 0x0b0c))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	end := s.Duration - 2*time.Second
	for at := between(3*time.Second, 8*time.Second); at < end-3*time.Second; at += thinned(at, between(6*time.Second, 12*time.Second)) {
		s.Steps = append(s.Steps, step{At: at, Kind: stepFeedDown, Source: soakFeed, Picks: []uint64{uint64(1000 + rng.IntN(2000))}})
	}
	for at := between(8*time.Second, 16*time.Second); at < end-6*time.Second; at += thinned(at, between(40*time.Second, 60*time.Second)) {
		s.Steps = append(s.Steps, step{At: at, Kind: stepFeedCrash, Source: soakFeed})
	}
	n := 0
	for at := between(time.Second, 5*time.Second); at < end-3*time.Second; at += thinned(at, between(5*time.Second, 10*time.Second)) {
		ds := make([]faults.Deposit, 3+rng.IntN(4))
		for i := range ds {
			ds[i] = faults.Deposit{ID: fmt.Sprintf("%s_o%05d", soakSources[0], n), Account: fmt.Sprintf("%s%d", afterSendPrefix, n),
				Cents: int64(100 + rng.IntN(10000))}
			n++
		}
		s.Steps = append(s.Steps, step{At: at, Kind: stepSend, Source: soakSources[0], What: "oflaky", Copies: 1, Deposits: ds})
	}
}

// outboxString is how the schedule prints an outbox step.
func outboxString(st *step) string {
	if st.Kind == stepFeedCrash {
		return "PostgreSQL crashes at the feed's next first receipt"
	}
	return fmt.Sprintf("%s answers 503 for %d ms from its next delivery", st.Source, st.Picks[0])
}

// soakMessage is a committed outbox row, as the oracle reads it.
type soakMessage struct {
	key, destination, status string
	payload                  []byte
}

// checkOutbox checks the outbox's promises, in order, and returns the
// first broken one, or "":
//  1. every applied deposit (a ledger entry) wrote its message to each
//     destination in its transaction;
//  2. no message of a run that did not commit is delivered: none reached
//     the feed before its run was flushed (serve), and every body the feed
//     received, and every message in the stream, is a committed row's
//     payload, stamped by its run (soakOutboxTrigger);
//  3. every committed message is delivered: marked so, received by the
//     feed, and in the stream;
//  4. the stream holds a key twice only when the second copy came later
//     than the stream's duplicate window after the first (JetStream's
//     Nats-Msg-Id deduplication, docs/nats.md), a window that
//     create_stream made twice the relay's lease at least (2 minutes at
//     least), and every copy carries its key as Nats-Msg-Id; the feed, at
//     least once with a stable key (docs/handlers.md), may receive
//     re-sends, each the same body (promise 2).
func (s *soak) checkOutbox(ctx context.Context) string {
	msgs := s.readMessages(ctx)
	var missing string
	err := s.pool.QueryRow(ctx, `SELECT e.source || ':' || e.event_id || ':' || d FROM ledger_entries AS e
CROSS JOIN unnest($1::text[]) AS d
WHERE NOT EXISTS (SELECT 1 FROM hookinbox_outbox AS o WHERE o.key = e.source || ':' || e.event_id || ':' || d)
ORDER BY 1 LIMIT 1`, []string{soakFeed, soakStream}).Scan(&missing)
	if err == nil {
		return fmt.Sprintf("deposit applied without its outbox message %s", missing)
	}
	require.ErrorIs(s.t, err, pgx.ErrNoRows)
	stored := s.readStream(ctx)
	o := s.out
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.early != "" {
		return o.early
	}
	for _, key := range slices.Sorted(maps.Keys(o.received)) {
		m := msgs[key]
		for _, body := range o.received[key] {
			if m == nil || m.destination != soakFeed || !bytes.Equal(body, m.payload) {
				return fmt.Sprintf("the feed received %s %s, which no committed run wrote (committed: %s)", key, body, m.describe())
			}
		}
	}
	for _, c := range stored {
		if m := msgs[c.key]; m == nil || m.destination != soakStream || !bytes.Equal(c.data, m.payload) {
			return fmt.Sprintf("the stream holds %s (seq %d) %s, which no committed run wrote (committed: %s)", c.key, c.seq, c.data, m.describe())
		}
	}
	inStream := map[string][]streamCopy{}
	for _, c := range stored {
		inStream[c.key] = append(inStream[c.key], c)
	}
	for _, key := range slices.Sorted(maps.Keys(msgs)) {
		m := msgs[key]
		switch {
		case m.status != "delivered":
			return fmt.Sprintf("outbox message %s is %s after the tail, want delivered", key, m.status)
		case m.destination == soakFeed && len(o.received[key]) == 0:
			return fmt.Sprintf("outbox message %s marked delivered, but the feed never received it", key)
		case m.destination == soakStream && len(inStream[key]) == 0:
			return fmt.Sprintf("outbox message %s marked delivered, but the stream does not hold it", key)
		}
	}
	window := s.streamWindow(ctx)
	if least := max(2*time.Minute, 2*soakRelayLease); window < least {
		return fmt.Sprintf("the stream's duplicate window is %s, less than twice the relay's lease (2 minutes at least): %s", window, least)
	}
	for _, c := range stored {
		cs := inStream[c.key]
		if i := slices.IndexFunc(cs, func(o streamCopy) bool { return o.seq == c.seq }); i > 0 && c.at.Sub(cs[i-1].at) <= window {
			return fmt.Sprintf("the stream holds %s twice (seq %d and %d, %s apart), inside its duplicate window of %s",
				c.key, cs[i-1].seq, c.seq, c.at.Sub(cs[i-1].at), window)
		}
	}
	for _, c := range stored {
		if c.msgID != c.key {
			return fmt.Sprintf("the stream holds %s (seq %d) with Nats-Msg-Id %q, not its key", c.key, c.seq, c.msgID)
		}
	}
	return ""
}

// describe is a committed message as a broken promise quotes it.
func (m *soakMessage) describe() string {
	if m == nil {
		return "none"
	}
	return fmt.Sprintf("%s to %s, %s", m.status, m.destination, m.payload)
}

// readMessages returns the outbox's rows by key.
func (s *soak) readMessages(ctx context.Context) map[string]*soakMessage {
	rows, err := s.pool.Query(ctx, `SELECT key, destination, status, payload FROM hookinbox_outbox`)
	require.NoError(s.t, err)
	out := map[string]*soakMessage{}
	for rows.Next() {
		m := &soakMessage{}
		require.NoError(s.t, rows.Scan(&m.key, &m.destination, &m.status, &m.payload))
		out[m.key] = m
	}
	require.NoError(s.t, rows.Err())
	return out
}

// streamCopy is a message the stream holds.
type streamCopy struct {
	key   string // the message's key, from its subject's source and its payload's event_id
	msgID string // its Nats-Msg-Id
	seq   uint64
	at    time.Time // when the stream stored it (the server's clock)
	data  []byte
}

// jetStream connects to the soak's NATS server; close the connection when
// done.
func (s *soak) jetStream() (*nats.Conn, jetstream.JetStream) {
	nc, err := nats.Connect(s.out.natsURL, nats.Timeout(5*time.Second))
	require.NoError(s.t, err, "the soak's NATS server")
	js, err := jetstream.New(nc)
	require.NoError(s.t, err)
	return nc, js
}

// readStream returns every message the stream holds, in sequence order.
func (s *soak) readStream(ctx context.Context) []streamCopy {
	nc, js := s.jetStream()
	defer nc.Close()
	st, err := js.Stream(ctx, s.out.stream)
	require.NoError(s.t, err, "the soak's stream %s (the workers' relays create it)", s.out.stream)
	info, err := st.Info(ctx)
	require.NoError(s.t, err)
	var out []streamCopy
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		require.NoError(s.t, err, "stream %s, seq %d", s.out.stream, seq)
		var p struct {
			EventID string `json:"event_id"`
		}
		_ = json.Unmarshal(m.Data, &p) // a body that is not the ledger's has no key: no committed run wrote it
		source := strings.Split(m.Subject, ".")[1]
		out = append(out, streamCopy{key: source + ":" + p.EventID + ":" + soakStream, msgID: m.Header.Get(nats.MsgIdHdr), seq: seq, at: m.Time, data: m.Data})
	}
	return out
}

// streamWindow is the stream's duplicate window.
func (s *soak) streamWindow(ctx context.Context) time.Duration {
	nc, js := s.jetStream()
	defer nc.Close()
	st, err := js.Stream(ctx, s.out.stream)
	require.NoError(s.t, err)
	return st.CachedInfo().Config.Duplicates
}

// outboxPending is the outbox's messages not yet delivered nor failed, as
// soak.pending lists them.
const outboxPending = `SELECT 'outbox ' || key || ' ' || status FROM hookinbox_outbox WHERE status = 'pending'`

// outboxSummary is the outbox side's figures.
func (s *soak) outboxSummary() string {
	var messages, attempts int
	require.NoError(s.t, s.pool.QueryRow(context.Background(),
		`SELECT count(*), coalesce(sum(attempts), 0) FROM hookinbox_outbox`).Scan(&messages, &attempts))
	o := s.out
	o.mu.Lock()
	defer o.mu.Unlock()
	deliveries, resent := 0, 0
	for _, bodies := range o.received {
		deliveries += len(bodies)
		resent += len(bodies) - 1
	}
	return fmt.Sprintf("%d outbox messages (%d claims), feed: %d deliveries (%d re-sends), %d refused in %d outages; "+
		"%d PostgreSQL crashes at a delivery (%d at a first receipt); stream %s",
		messages, attempts, deliveries, resent, o.refused, o.outages, o.crashes, o.onFirst, strings.TrimPrefix(o.stream, "T_"))
}
