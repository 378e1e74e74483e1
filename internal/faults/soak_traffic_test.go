package faults_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/faults"
	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// The soak's traffic beyond the Standard Webhooks sources (issue 40):
//   - card, a Marqeta source: batches of up to 10 deposits per request,
//     sent new, raced to both receivers, sent again late, and overlapping
//     earlier batches (some of their items and fresh ones);
//   - store, a Shopify source: deposits delivered under two or more
//     delivery ids (X-Shopify-Webhook-Id) with one X-Shopify-Event-Id, the
//     twins the inbox's second unique key (source, twin_key) must fold
//     into one row, raced and late;
//   - on shop, scenes of out-of-order versions of fresh sequence keys,
//     sent while shop is paused and resumed once all are acknowledged;
//   - a bulk replay of card's done events (inboxctl replay --status done).
//
// Both new sources are routed to the ledger (and the log handler) like the
// others, each with its own secret.
const (
	stepBatch     stepKind = "batch"     // card: deliver Deposits as one batch, Copies times at once (to both receivers)
	stepTwins     stepKind = "twins"     // store: deliver each of Deposits (ID "<event>.<n>": its delivery id) at once
	stepSeqSend   stepKind = "seqsend"   // shop (paused): deliver Deposits one by one, in their order, versions descending
	stepSeqResume stepKind = "seqresume" // shop: resume once the scene's deliveries are answered
	stepBulkDone  stepKind = "bulkdone"  // inboxctl replay --source card --status done, run to its end
)

// The new sources, their secrets and what they carry.
const (
	cardSource   = "card"
	cardCategory = "transactions" // the batch's category: each item's event type
	cardSecret   = "soak-card-hmac-9d41c07e2b"
	cardUser     = "soak"
	cardPassword = "soak-card-password-5e8f31"
	storeSource  = "store"
	storeSecret  = "shpss_soakstore7c2a90d4e1"
	storeTopic   = "orders/paid"
	storeDomain  = "soak.myshopify.com"
)

// The sequencing scenes: seqKeys fresh keys (accounts) of seqVersions
// versions each.
const (
	seqKeys     = 3
	seqVersions = 5
	seqPrefix   = "acc_seq_"
)

// trafficSecrets are the new sources' credentials, none of which may be
// logged.
var trafficSecrets = []string{cardSecret, cardPassword, storeSecret}

// soakTrafficTrigger records what the traffic's promises are checked
// against:
//   - soak_seq holds each scene event's key and version, and soak_applied's
//     "ahead" notes, for each run of a scene event, the events of its key
//     with a lower version that were pending then and had failed fewer
//     attempts than poison_after: what the sequencing gate promises to run
//     first (read in the run's own transaction, after the gate, under the
//     key's lock);
//   - soak_replayed records every row of card put back to pending that was
//     done before the transaction began (only the bulk replay does that on
//     card: a worker's take marks a row done in the event's transaction,
//     and puts it back to pending in that transaction when the event is to
//     be worked again).
var soakTrafficTrigger = fmt.Sprintf(`
CREATE TABLE soak_seq (source text NOT NULL, event_id text NOT NULL, seq_key text NOT NULL, v bigint NOT NULL,
    PRIMARY KEY (source, event_id));
ALTER TABLE soak_applied ADD COLUMN ahead text;
CREATE FUNCTION soak_seq_ahead() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    k text;
    mine bigint;
BEGIN
    SELECT q.seq_key, q.v INTO k, mine FROM soak_seq AS q WHERE q.source = NEW.source AND q.event_id = NEW.event_id;
    IF FOUND THEN
        NEW.ahead := (SELECT string_agg(q.event_id || ' (v' || q.v || ')', ', ' ORDER BY q.v)
            FROM soak_seq AS q JOIN webhook_inbox AS i ON i.source = q.source AND i.event_id = q.event_id
            WHERE q.source = NEW.source AND q.seq_key = k AND q.v < mine
              AND i.status = 'pending' AND i.erased_at IS NULL AND i.attempts < %d);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_seq_ahead BEFORE INSERT ON soak_applied FOR EACH ROW EXECUTE FUNCTION soak_seq_ahead();
CREATE TABLE soak_replayed (source text NOT NULL, event_id text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(), app text NOT NULL DEFAULT current_setting('application_name'),
    xid bigint NOT NULL DEFAULT txid_current(), query text NOT NULL DEFAULT current_query());
CREATE FUNCTION soak_replayed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'done' THEN
        PERFORM set_config('soak.done_' || NEW.id, 'yes', true);
    ELSIF NEW.status = 'pending' AND current_setting('soak.done_' || NEW.id, true) IS DISTINCT FROM 'yes' THEN
        INSERT INTO soak_replayed (source, event_id) VALUES (NEW.source, NEW.event_id);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER soak_replayed AFTER UPDATE ON webhook_inbox FOR EACH ROW
    WHEN (NEW.source = '%s' AND (OLD.status = 'done') <> (NEW.status = 'done')) EXECUTE FUNCTION soak_replayed();`,
	worker.SequencePoisonAfterDefault, cardSource)

// soakTraffic is what the traffic's steps sent and saw.
type soakTraffic struct {
	mu sync.Mutex
	// card: the items sent and acknowledged, by token.
	cardSent  map[string]faults.Deposit
	cardAcked map[string]bool
	// store: the events sent, by their event id (X-Shopify-Event-Id), the
	// delivery ids each was sent under, and the deliveries acknowledged.
	storeSent       map[string]faults.Deposit
	storeDeliveries map[string][]string
	storeAcked      map[string]bool
	// scenes are the sequencing scenes, in order; scene is the one whose
	// deliveries are in flight.
	scenes []*seqScene
	// bulks are the bulk replays of done events started; broken is a
	// promise a step saw broken.
	bulks  []int64
	broken string
	counts map[string]int // "batch race", "twins late", …
}

// seqScene is one scene of out-of-order versions: its events, and whether
// every one was acknowledged before the resume (only then is the order
// promise checked: all were in the inbox, pending, before any ran).
type seqScene struct {
	ids      []string
	resumed  time.Time // by the database's clock, just before the resume
	cancel   context.CancelFunc
	done     chan struct{}
	complete bool
}

// startTraffic adds the traffic's triggers to the soak's database.
func (s *soak) startTraffic() *soakTraffic {
	_, err := s.pool.Exec(context.Background(), soakTrafficTrigger)
	require.NoError(s.t, err)
	return &soakTraffic{cardSent: map[string]faults.Deposit{}, cardAcked: map[string]bool{},
		storeSent: map[string]faults.Deposit{}, storeDeliveries: map[string][]string{}, storeAcked: map[string]bool{},
		counts: map[string]int{}}
}

// trafficSources are the new sources' entries in the daemons' configs.
func trafficSources() string {
	return fmt.Sprintf("\n  - {name: %s, provider: marqeta, secrets: [%q], basic_auth: [{username: %s, password: %q}]}"+
		"\n  - {name: %s, provider: shopify, secrets: [%q]}", cardSource, cardSecret, cardUser, cardPassword, storeSource, storeSecret)
}

// trafficRoutes are the new sources' routes, to handlers, with options (more
// keys in flow style, the destinations).
func trafficRoutes(handlers, options string) string {
	return fmt.Sprintf("\n    - {source: %s, types: [%s], handlers: [%s]%s}\n    - {source: %s, types: [%q], handlers: [%s]%s}",
		cardSource, cardCategory, handlers, options, storeSource, storeTopic, handlers, options)
}

// cardEventID is the inbox's id of a card item: Marqeta's
// "<category>:<token>".
func cardEventID(token string) string { return cardCategory + ":" + token }

// twinOf is the store event a delivery id ("<event>.<n>") delivers.
func twinOf(delivery string) string {
	event, _, _ := strings.Cut(delivery, ".")
	return event
}

// addTrafficSteps adds the traffic's steps to s, from a generator of their
// own (the rest of the schedule draws the same for a seed whatever they
// are), after the worker side's: card batches and store twins every 1 to 3
// s, a sequencing scene in each route set that sequences shop (when shop
// has no other pause there), and one bulk replay of done events.
func addTrafficSteps(s *schedule) {
	rng := rand.New(rand.NewPCG(s.Seed, 0x7aff))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	end := s.Duration - 2*time.Second
	account := func() string { return fmt.Sprintf("acc_%d", rng.IntN(soakAccount)) }
	n := 0
	fresh := func(prefix string, count int) []faults.Deposit {
		ds := make([]faults.Deposit, count)
		for i := range ds {
			ds[i] = faults.Deposit{ID: fmt.Sprintf("%s_%05d", prefix, n), Account: account(), Cents: int64(100 + rng.IntN(10000))}
			n++
		}
		return ds
	}
	var steps []step
	var batches [][]faults.Deposit
	for at := between(0, time.Second); at < end; at += thinned(at, between(time.Second, 3*time.Second)) {
		st := step{At: at, Kind: stepBatch, Source: cardSource, Copies: 1}
		switch k := rng.IntN(10); {
		case k < 4 || len(batches) == 0:
			st.What, st.Deposits = "new", fresh(cardSource, 3+rng.IntN(8))
		case k < 6:
			st.What, st.Copies, st.Deposits = "race", 2, fresh(cardSource, 3+rng.IntN(8))
		case k < 8:
			st.What, st.Deposits = "late", batches[rng.IntN(len(batches))]
		default:
			old := batches[rng.IntN(len(batches))]
			old = old[:1+rng.IntN(min(len(old), 9))]
			mixed := append(slices.Clone(old), fresh(cardSource, 1+rng.IntN(10-len(old)))...)
			rng.Shuffle(len(mixed), func(i, j int) { mixed[i], mixed[j] = mixed[j], mixed[i] })
			st.What, st.Deposits = "overlap", mixed
		}
		if st.What != "late" {
			batches = append(batches, st.Deposits)
		}
		steps = append(steps, st)
	}
	type event struct {
		d          faults.Deposit
		deliveries int
	}
	var events []*event
	deliver := func(e *event) faults.Deposit {
		d := e.d
		d.ID = fmt.Sprintf("%s.%d", e.d.ID, e.deliveries)
		e.deliveries++
		return d
	}
	for at := between(0, time.Second); at < end; at += thinned(at, between(time.Second, 3*time.Second)) {
		st := step{At: at, Kind: stepTwins, Source: storeSource, Copies: 1}
		var pick []*event
		switch k := rng.IntN(10); {
		case k < 4 || len(events) == 0:
			st.What = "new"
			for _, d := range fresh(storeSource, 2+rng.IntN(5)) {
				e := &event{d: d}
				events = append(events, e)
				st.Deposits = append(st.Deposits, deliver(e))
			}
		case k < 7:
			st.What = "race"
			for _, d := range fresh(storeSource, 2+rng.IntN(3)) {
				e := &event{d: d}
				events = append(events, e)
				st.Deposits = append(st.Deposits, deliver(e), deliver(e))
			}
		case k < 9:
			st.What = "late"
			for range 2 + rng.IntN(3) {
				pick = append(pick, events[rng.IntN(len(events))])
			}
			for _, e := range pick {
				st.Deposits = append(st.Deposits, deliver(e))
			}
		default:
			st.What = "dup"
			for range 2 + rng.IntN(3) {
				e := events[rng.IntN(len(events))]
				d := e.d
				d.ID = fmt.Sprintf("%s.%d", e.d.ID, rng.IntN(e.deliveries))
				st.Deposits = append(st.Deposits, d)
			}
		}
		steps = append(steps, st)
	}
	steps = append(steps, seqScenes(s, rng, end)...)
	steps = append(steps, step{At: between(end/2, end-3*time.Second), Kind: stepBulkDone, Source: cardSource})
	s.Steps = append(s.Steps, steps...)
}

// seqScenes returns a sequencing scene for each rollout of a route set that
// sequences shop: seqKeys fresh keys' versions sent while shop is paused,
// the highest first (so that their arrival order is the reverse of their
// order), and shop resumed after the older set was retired, once every one
// is acknowledged: the events then all run under the sequencing set, unless
// a fault delays them past the next rollout. Where shop has no other pause
// there (ownPause), the scene pauses shop, sends 600 ms later, and resumes
// after the retirement; else it sends 600 ms into a pause of shop already
// there that ends after the retirement and a second before the next
// rollout, and that pause's resume waits for the scene's deliveries.
func seqScenes(s *schedule, rng *rand.Rand, end time.Duration) []step {
	var out []step
	var waits []int // the resumes of pauses already there that a scene's deliveries must precede
	scene := 0
	versions := func(at time.Duration) step {
		ds := make([]faults.Deposit, 0, seqKeys*seqVersions)
		for v := seqVersions; v >= 1; v-- {
			for k := range seqKeys {
				ds = append(ds, faults.Deposit{ID: fmt.Sprintf("%s_seq%02d_%d_%d", soakSources[1], scene, k, v),
					Account: fmt.Sprintf("%s%d_%d", seqPrefix, scene, k), Cents: int64(100 + rng.IntN(10000)), Version: int64(v)})
			}
		}
		scene++
		return step{At: at, Kind: stepSeqSend, Source: soakSources[1], What: "versions", Copies: 1, Deposits: ds}
	}
	for i, st := range s.Steps {
		if st.Kind != stepRollout || !strings.Contains(shopRouteOptions(st.Index), "sequence") {
			continue
		}
		r := slices.IndexFunc(s.Steps[i:], func(o step) bool { return o.Kind == stepRetire && o.Index == st.Index-1 })
		if r < 0 {
			continue
		}
		retire, next := s.Steps[i+r].At, end
		if n := slices.IndexFunc(s.Steps[i+1:], func(o step) bool { return o.Kind == stepRollout }); n >= 0 {
			next = s.Steps[i+1+n].At
		}
		if own, resume, ok := ownPause(s, st.At+200*time.Millisecond, retire, next); ok {
			out = append(out, step{At: own, Kind: stepPause, Source: soakSources[1]}, versions(own+600*time.Millisecond),
				step{At: resume, Kind: stepSeqResume, Source: soakSources[1]})
			continue
		}
		paused := time.Duration(-1)
		for j, o := range s.Steps {
			switch {
			case o.Source != soakSources[1]:
			case o.Kind == stepPause:
				paused = o.At
			case o.Kind == stepResume && paused >= 0:
				if send := paused + 600*time.Millisecond; o.At > retire && o.At+time.Second < next && send+time.Second < o.At {
					out = append(out, versions(send))
					waits = append(waits, j)
				}
				paused = -1
			}
		}
	}
	for _, j := range waits {
		s.Steps[j].Kind = stepSeqResume
	}
	return out
}

// ownPause returns the earliest time from lo on at which a scene can pause
// shop, with no other pause of shop from half a second before it to a
// second after its resume, and that resume: 2 s after the pause at least,
// 300 ms after the older set's retirement, and 4 s before the next rollout.
func ownPause(s *schedule, lo, retire, next time.Duration) (at, resume time.Duration, ok bool) {
	for at = lo; ; at += 250 * time.Millisecond {
		resume = max(at+2*time.Second, retire+300*time.Millisecond)
		if resume+4*time.Second > next {
			return 0, 0, false
		}
		if _, free := s.clearOfPauses(soakSources[1], at, at+time.Millisecond, resume-at+time.Second); free {
			return at, resume, true
		}
	}
}

// trafficString is how the schedule prints a traffic step, "" for another
// step.
func trafficString(st *step) string {
	switch st.Kind {
	case stepBatch:
		return fmt.Sprintf("%s %-7s 1 batch of %d ×%d (%s …)", st.Source, st.What, len(st.Deposits), st.Copies, st.Deposits[0].ID)
	case stepTwins:
		return fmt.Sprintf("%s %-7s %d deliveries (%s …)", st.Source, st.What, len(st.Deposits), st.Deposits[0].ID)
	case stepSeqSend:
		return fmt.Sprintf("%s %d versions of %d keys, highest first (%s …)", st.Source, len(st.Deposits), seqKeys, st.Deposits[0].ID)
	case stepSeqResume, stepBulkDone:
		return st.Source
	}
	return ""
}

// doTraffic runs a traffic step, and reports whether st was one.
func (s *soak) doTraffic(ctx context.Context, st *step) bool {
	switch st.Kind {
	case stepBatch:
		s.sendBatch(ctx, st)
	case stepTwins:
		s.sendTwins(ctx, st)
	case stepSeqSend:
		s.seqSend(ctx, st)
	case stepSeqResume:
		s.seqResume(ctx)
	case stepBulkDone:
		s.bulkDone(ctx)
	default:
		return false
	}
	s.tr.mu.Lock()
	s.tr.counts[string(st.Kind)+" "+st.What]++
	s.tr.mu.Unlock()
	return true
}

// sourceURLs are src's webhook URLs, one per receiver.
func (s *soak) sourceURLs(src string) []string {
	var out []string
	for _, u := range s.urls[soakSources[0]] {
		out = append(out, strings.TrimSuffix(u, soakSources[0])+src)
	}
	return out
}

// postUntil200 sends the request build makes for each URL in turn, from the
// start'th, until one is answered 200 or ctx ends, as a provider retries;
// it reports whether one was.
func postUntil200(ctx context.Context, urls []string, start int, build func(ctx context.Context, url string) (*http.Request, error)) bool {
	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	backoff := 10 * time.Millisecond
	for i := start; ; i++ {
		req, err := build(ctx, urls[i%len(urls)])
		if err != nil {
			panic(err) // the soak's own signing: a bug in the soak
		}
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(backoff): // a provider's backoff between retries
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// sendBatch delivers the step's items as one Marqeta batch, Copies times
// at once, each copy to another receiver first.
func (s *soak) sendBatch(ctx context.Context, st *step) {
	items := make([]string, len(st.Deposits))
	s.tr.mu.Lock()
	for i, d := range st.Deposits {
		s.tr.cardSent[d.ID] = d
		items[i] = fmt.Sprintf(`{"token":%q,"type":%q,"data":{"account_id":%q,"amount":"%d.%02d"}}`,
			d.ID, faults.DepositType, d.Account, d.Cents/100, d.Cents%100)
	}
	s.tr.mu.Unlock()
	body := fmt.Appendf(nil, `{%q:[%s]}`, cardCategory, strings.Join(items, ","))
	params := &webhook.Params{Provider: "marqeta", Secret: cardSecret, Body: body,
		Config: &provider.Config{BasicAuth: []provider.BasicAuth{{Username: cardUser, Password: cardPassword}}}}
	urls := s.sourceURLs(cardSource)
	for c := range st.Copies {
		s.sends.Go(func() {
			if !postUntil200(ctx, urls, c, func(ctx context.Context, url string) (*http.Request, error) {
				return webhook.NewRequest(ctx, url, params)
			}) {
				return
			}
			s.tr.mu.Lock()
			defer s.tr.mu.Unlock()
			for _, d := range st.Deposits {
				s.tr.cardAcked[d.ID] = true
			}
		})
	}
}

// sendTwins delivers each of the step's deliveries at once, as Shopify
// sends one event to two subscriptions: its own X-Shopify-Webhook-Id, the
// event's X-Shopify-Event-Id.
func (s *soak) sendTwins(ctx context.Context, st *step) {
	s.tr.mu.Lock()
	for _, d := range st.Deposits {
		event := twinOf(d.ID)
		s.tr.storeSent[event] = d
		if !slices.Contains(s.tr.storeDeliveries[event], d.ID) {
			s.tr.storeDeliveries[event] = append(s.tr.storeDeliveries[event], d.ID)
		}
	}
	s.tr.mu.Unlock()
	urls := s.sourceURLs(storeSource)
	for i, d := range st.Deposits {
		s.sends.Go(func() {
			if !postUntil200(ctx, urls, i, func(ctx context.Context, url string) (*http.Request, error) {
				req, err := webhook.NewRequest(ctx, url, &webhook.Params{Provider: "shopify", Secret: storeSecret,
					EventID: d.ID, EventType: storeTopic, Body: d.Body()})
				if err == nil {
					req.Header.Set("X-Shopify-Shop-Domain", storeDomain)
					req.Header.Set("X-Shopify-Event-Id", twinOf(d.ID))
				}
				return req, err
			}) {
				return
			}
			s.tr.mu.Lock()
			defer s.tr.mu.Unlock()
			s.tr.storeAcked[d.ID] = true
		})
	}
}

// seqSend notes the scene's keys and versions (soak_seq), then delivers
// its events one at a time in the step's order (shop is paused: they wait
// in the inbox). The resume that follows waits for them.
func (s *soak) seqSend(ctx context.Context, st *step) {
	src := st.Source
	scene := &seqScene{done: make(chan struct{})}
	for _, d := range st.Deposits {
		scene.ids = append(scene.ids, d.ID)
		_, err := s.pool.Exec(ctx, `INSERT INTO soak_seq VALUES ($1, $2, $3, $4)`, src, d.ID, d.Account, d.Version)
		require.NoError(s.t, err)
	}
	s.mu.Lock()
	for _, d := range st.Deposits {
		s.sent[src][d.ID] = d
	}
	s.mu.Unlock()
	var sctx context.Context
	sctx, scene.cancel = context.WithCancel(ctx)
	s.tr.mu.Lock()
	s.tr.scenes = append(s.tr.scenes, scene)
	s.tr.mu.Unlock()
	s.waitPauseSeen(src)
	secret, signed := s.signer(src)
	sender := &faults.Sender{Targets: s.urls[src], Secret: secret, Workers: 1, Timeout: 5 * time.Second}
	s.sends.Go(func() {
		defer close(scene.done)
		defer signed()
		rep := sender.Run(sctx, st.Deposits)
		s.mu.Lock()
		for _, a := range rep.Acks {
			s.acked[src][a.ID] = true
		}
		s.mu.Unlock()
		scene.complete = len(rep.Acks) == len(st.Deposits)
	})
}

// waitPauseSeen waits until every running worker's last word on src is
// "source paused" (its view has the pause: it holds src's events from now
// on), seqResumeWait at most: a scene's first version must not run before
// the others are in the inbox.
func (s *soak) waitPauseSeen(src string) {
	seen := func(p *proctest.Process) bool {
		paused := false
		for _, line := range strings.Split(p.Log(), "\n") {
			var l logLine
			if !strings.Contains(line, `"source paused`) && !strings.Contains(line, `"source resumed"`) || json.Unmarshal([]byte(line), &l) != nil || l.Source != src {
				continue
			}
			paused = l.Msg != "source resumed"
		}
		return paused
	}
	for began := time.Now(); time.Since(began) < seqResumeWait; {
		all := true
		for _, p := range append(slices.Clone(s.procs[workerRole]), s.w.next...) {
			if !p.Exited() && !seen(p) {
				all = false
			}
		}
		if all {
			return
		}
		<-time.After(50 * time.Millisecond) // polling a condition with a deadline
	}
}

// seqResumeWait bounds how long a resume waits for its scene's
// deliveries; a scene not acknowledged by then (both receivers down) is
// not checked for order (the schedule waits for nothing else meanwhile).
const seqResumeWait = 15 * time.Second

// seqResume resumes shop once the last scene's deliveries are all answered
// (or given up after seqResumeWait: that scene is then not checked), then
// waits until its events are done, seqResumeWait at most: the schedule's
// next steps (a rollout among them) wait, so that the events run under the
// route set that sequences shop unless a fault holds them longer.
func (s *soak) seqResume(ctx context.Context) {
	s.tr.mu.Lock()
	scene := s.tr.scenes[len(s.tr.scenes)-1]
	s.tr.mu.Unlock()
	select {
	case <-scene.done:
	case <-time.After(seqResumeWait):
		scene.cancel()
		<-scene.done
	}
	require.NoError(s.t, s.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&scene.resumed))
	s.do(ctx, &step{Kind: stepResume, Source: soakSources[1]})
	for began := time.Now(); scene.complete && time.Since(began) < seqResumeWait; {
		var left int
		err := s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE source = $1 AND event_id = ANY($2) AND status <> 'done'`,
			soakSources[1], scene.ids).Scan(&left)
		if err == nil && left == 0 {
			return
		}
		<-time.After(100 * time.Millisecond) // polling a condition with a deadline
	}
}

// bulkDone starts a bulk replay of card's done events, in batches of 20,
// and lets it run to its end. When card has done events, the replay must
// find some (a replay that cannot select done rows finds none).
func (s *soak) bulkDone(ctx context.Context) {
	for range 3 {
		var done int
		require.NoError(s.t, s.pool.QueryRow(ctx, `SELECT count(*) FROM webhook_inbox WHERE source = $1 AND status = 'done' AND erased_at IS NULL`,
			cardSource).Scan(&done))
		code, out := proctest.Run(s.t, command(s.inboxctl, "replay", "--source", cardSource, "--status", "done", "--batch", "20", "--config", s.configs[0]))
		s.ctlLogs = append(s.ctlLogs, out)
		if code != 0 {
			continue // its connection terminated, say: try again
		}
		s.tr.mu.Lock()
		defer s.tr.mu.Unlock()
		if m := bulkStarted.FindStringSubmatch(out); m != nil {
			id, err := strconv.ParseInt(m[1], 10, 64)
			require.NoError(s.t, err)
			s.tr.bulks = append(s.tr.bulks, id)
		} else if done > 0 && s.tr.broken == "" {
			s.tr.broken = fmt.Sprintf("a bulk replay of %s's done events replayed nothing while %d were done: %s", cardSource, done, strings.TrimSpace(out))
		}
		return
	}
}

// checkTraffic is the traffic's promises, checked by the oracle after the
// others' per-event promises:
//   - every acknowledged card item is in the inbox, done, and applied once,
//     and once more for each time the bulk replay put it back to pending;
//   - the bulk replays found card's done events, and each replayed exactly
//     as many rows as went back from done to pending;
//   - every store event with an acknowledged delivery is in the inbox once,
//     under one of its delivery ids, done and applied once: its twins
//     folded into that row;
//   - no event of a sequencing scene acknowledged whole before its resume
//     ran under a route set that sequences shop while an event of its key
//     with a lower version was pending (and had failed fewer than
//     poison_after attempts): all were in the inbox, pending, before any
//     ran, so they run in version order, whatever order they arrived in;
//   - none of the new sources' credentials in any log.
func (s *soak) checkTraffic(ctx context.Context, rows map[string]*soakRow) string {
	tr := s.tr
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.broken != "" {
		return tr.broken
	}
	replayed := s.countBy(ctx, `SELECT event_id, count(*) FROM soak_replayed GROUP BY 1`)
	for token := range tr.cardAcked {
		id := cardEventID(token)
		r, ok := rows[cardSource+"/"+id]
		switch {
		case !ok:
			return fmt.Sprintf("acknowledged batch item %s/%s is not in the inbox", cardSource, id)
		case r.status != "done":
			return fmt.Sprintf("batch item %s/%s: status %s (%s), want done", cardSource, id, r.status, r.lastError)
		case r.applied != 1+replayed[id]:
			return fmt.Sprintf("batch item %s/%s applied %d times, want exactly once and once more per bulk replay (%d): %s",
				cardSource, id, r.applied, replayed[id], s.history(ctx, cardSource, id))
		}
	}
	if broken := s.checkBulkDone(ctx, replayed); broken != "" {
		return broken
	}
	for event, deliveries := range tr.storeDeliveries {
		acked := slices.ContainsFunc(deliveries, func(d string) bool { return tr.storeAcked[d] })
		var stored []string
		for _, d := range deliveries {
			if _, ok := rows[storeSource+"/"+d]; ok {
				stored = append(stored, d)
			}
		}
		switch {
		case len(stored) > 1:
			return fmt.Sprintf("store event %s is in the inbox %d times, under its twins' ids %v: want once", event, len(stored), stored)
		case acked && len(stored) == 0:
			return fmt.Sprintf("store event %s, acknowledged, is not in the inbox under any of %v", event, deliveries)
		case len(stored) == 1 && (rows[storeSource+"/"+stored[0]].status != "done" || rows[storeSource+"/"+stored[0]].applied != 1):
			r := rows[storeSource+"/"+stored[0]]
			return fmt.Sprintf("store event %s (row %s): status %s, applied %d times, want done once", event, stored[0], r.status, r.applied)
		}
	}
	if broken := s.checkSequenced(ctx); broken != "" {
		return broken
	}
	for i, p := range s.all {
		for _, sec := range trafficSecrets {
			if strings.Contains(p.Log(), sec) {
				return fmt.Sprintf("a credential of %s or %s in process %d's log", cardSource, storeSource, i)
			}
		}
	}
	for i, out := range s.ctlLogs {
		for _, sec := range trafficSecrets {
			if strings.Contains(out, sec) {
				return fmt.Sprintf("a credential of %s or %s in inboxctl run %d's output", cardSource, storeSource, i)
			}
		}
	}
	return ""
}

// history is what the soak's triggers recorded of an event: its committed
// runs and its returns from done to pending, in time order.
func (s *soak) history(ctx context.Context, source, id string) string {
	rows, err := s.pool.Query(ctx, `SELECT began_at, 'run by ' || app FROM soak_applied WHERE source = $1 AND event_id = $2
UNION ALL SELECT at, 'done to pending by ' || app || ' (xid ' || xid || '): ' || left(regexp_replace(query, '\s+', ' ', 'g'), 80)
FROM soak_replayed WHERE source = $1 AND event_id = $2 ORDER BY 1`, source, id)
	require.NoError(s.t, err)
	var out []string
	for rows.Next() {
		var at time.Time
		var what string
		require.NoError(s.t, rows.Scan(&at, &what))
		out = append(out, at.Format("15:04:05.000")+" "+what)
	}
	require.NoError(s.t, rows.Err())
	return strings.Join(out, "; ")
}

// countBy runs a query of (text, count) rows and returns them as a map.
func (s *soak) countBy(ctx context.Context, query string, args ...any) map[string]int {
	rows, err := s.pool.Query(ctx, query, args...)
	require.NoError(s.t, err)
	out := map[string]int{}
	for rows.Next() {
		var key string
		var n int
		require.NoError(s.t, rows.Scan(&key, &n))
		out[key] = n
	}
	require.NoError(s.t, rows.Err())
	return out
}

// checkBulkDone: each bulk replay of done events has ended (the quiet
// tail waits for running replays), and together they replayed as many
// rows as went back from done to pending on card.
func (s *soak) checkBulkDone(ctx context.Context, replayed map[string]int) string {
	went := 0
	for _, n := range replayed {
		went += n
	}
	total := 0
	for _, id := range s.tr.bulks {
		var state string
		var n int
		require.NoError(s.t, s.pool.QueryRow(ctx, `SELECT state, replayed FROM hookinbox_replay WHERE id = $1`, id).Scan(&state, &n))
		if state != "done" {
			return fmt.Sprintf("bulk replay %d of %s's done events is %s after the tail, want done", id, cardSource, state)
		}
		total += n
	}
	if total != went {
		return fmt.Sprintf("bulk replays of %s's done events counted %d rows replayed, but %d went back from done to pending", cardSource, total, went)
	}
	return ""
}

// routeSetGen matches a route set's application_name.
var routeSetGen = regexp.MustCompile(`^soak_routes_([0-9]+)$`)

// sequencingSet reports whether the route set whose workers connect as app
// sequences shop.
func sequencingSet(app string) bool {
	m := routeSetGen.FindStringSubmatch(app)
	if m == nil {
		return false
	}
	gen, _ := strconv.Atoi(m[1])
	return strings.Contains(shopRouteOptions(gen), "sequence")
}

// checkSequenced is the order promise of the sequencing scenes (see
// checkTraffic).
func (s *soak) checkSequenced(ctx context.Context) string {
	complete := map[string]bool{}
	for _, sc := range s.tr.scenes {
		for _, id := range sc.ids {
			complete[id] = sc.complete
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT a.event_id, q.seq_key, q.v, a.app, coalesce(a.ahead, '') FROM soak_applied AS a
JOIN soak_seq AS q ON q.source = a.source AND q.event_id = a.event_id ORDER BY a.began_at`)
	require.NoError(s.t, err)
	defer rows.Close()
	for rows.Next() {
		var id, key, app, ahead string
		var v int64
		require.NoError(s.t, rows.Scan(&id, &key, &v, &app, &ahead))
		if complete[id] && sequencingSet(app) && ahead != "" {
			return fmt.Sprintf("event %s/%s (key %s, v%d) ran under %s, which sequences it, while earlier versions of its key were pending: %s",
				soakSources[1], id, key, v, app, ahead)
		}
	}
	require.NoError(s.t, rows.Err())
	return ""
}

// trafficSummary is the traffic's figures: steps by kind, and the
// sequencing scenes' runs the order promise checked.
func (s *soak) trafficSummary() string {
	byApp := s.countBy(context.Background(), `SELECT a.app, count(*) FROM soak_applied AS a JOIN soak_seq AS q USING (source, event_id)
WHERE a.event_id = ANY($1) GROUP BY 1`, s.completeSceneIDs())
	var runs []string
	checked := 0
	for app, n := range byApp {
		runs = append(runs, fmt.Sprintf("%s %d", app, n))
		if sequencingSet(app) {
			checked += n
		}
	}
	slices.Sort(runs)
	early := 0
	for _, sc := range s.tr.scenes {
		var n int
		require.NoError(s.t, s.pool.QueryRow(context.Background(), `SELECT count(*) FROM soak_applied WHERE source = $1 AND event_id = ANY($2) AND began_at < $3`,
			soakSources[1], sc.ids, sc.resumed).Scan(&n))
		early += n
	}
	tr := s.tr
	tr.mu.Lock()
	defer tr.mu.Unlock()
	kinds := make([]string, 0, len(tr.counts))
	for k, n := range tr.counts {
		kinds = append(kinds, fmt.Sprintf("%s %d", strings.TrimSpace(k), n))
	}
	slices.Sort(kinds)
	complete := 0
	for _, sc := range tr.scenes {
		if sc.complete {
			complete++
		}
	}
	return fmt.Sprintf("traffic: %s; %d batch items and %d store events acknowledged; %d sequencing scenes, %d acknowledged whole, "+
		"%d runs of theirs under a route set that sequences shop, checked for order (runs by route set: %s; %d began before their resume)",
		strings.Join(kinds, ", "), len(tr.cardAcked), s.ackedStoreEvents(), len(tr.scenes), complete, checked, strings.Join(runs, ", "), early)
}

// completeSceneIDs are the events of the scenes acknowledged whole.
func (s *soak) completeSceneIDs() []string {
	s.tr.mu.Lock()
	defer s.tr.mu.Unlock()
	var ids []string
	for _, sc := range s.tr.scenes {
		if sc.complete {
			ids = append(ids, sc.ids...)
		}
	}
	return ids
}

// ackedStoreEvents counts the store events with an acknowledged delivery;
// the caller holds tr.mu.
func (s *soak) ackedStoreEvents() int {
	n := 0
	for _, deliveries := range s.tr.storeDeliveries {
		if slices.ContainsFunc(deliveries, func(d string) bool { return s.tr.storeAcked[d] }) {
			n++
		}
	}
	return n
}

// TestSoakScheduleTraffic checks, without a database, what the traffic's
// steps promise the soak: the same seed draws the same schedule; a batch
// holds 1 to 10 items; every sequencing scene pauses shop, sends, then
// resumes it, inside the window of a route set that sequences shop, with
// no other pause of shop meanwhile; and nearly every schedule has a scene (79 of these 80).
func TestSoakScheduleTraffic(t *testing.T) {
	t.Parallel()
	withScene := 0
	for seed := range uint64(40) {
		for _, d := range []time.Duration{45 * time.Second, 2 * time.Minute} {
			s := newSchedule(seed, d)
			require.Equal(t, s.String(), newSchedule(seed, d).String(), "seed %d", seed)
			scenes, gen, retired := 0, 0, -1
			paused, sent := false, false
			for _, st := range s.Steps {
				switch {
				case st.Kind == stepRollout:
					gen = st.Index
				case st.Kind == stepRetire:
					retired = st.Index
				case st.Kind == stepBatch:
					require.True(t, len(st.Deposits) >= 1 && len(st.Deposits) <= 10, "seed %d: %s", seed, &st)
				case st.Source != soakSources[1]:
				case st.Kind == stepPause:
					require.False(t, paused, "seed %d: %s: shop paused twice", seed, &st)
					paused = true
				case st.Kind == stepSeqSend:
					require.True(t, paused && !sent, "seed %d: %s: shop not paused, or a second scene in one pause", seed, &st)
					sent = true
				case st.Kind == stepResume || st.Kind == stepSeqResume:
					require.True(t, paused, "seed %d: %s: shop resumed unpaused", seed, &st)
					require.Equal(t, sent, st.Kind == stepSeqResume, "seed %d: %s: a scene's deliveries and its resume", seed, &st)
					if sent {
						scenes++
						require.Contains(t, shopRouteOptions(gen), "sequence", "seed %d: %s: not under a sequencing route set", seed, &st)
						require.Equal(t, gen-1, retired, "seed %d: %s: the older route set not retired yet", seed, &st)
					}
					paused, sent = false, false
				}
			}
			require.False(t, paused, "seed %d: shop left paused", seed)
			if scenes > 0 {
				withScene++
			}
		}
	}
	require.Greater(t, withScene, 75, "schedules with a sequencing scene, of 80")
}
