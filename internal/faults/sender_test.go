package faults

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookinbox/hookinbox/internal/webhook"
)

// DepositType is the event type of the ledger example's deposits.
const DepositType = "account.deposit"

// Deposit is one account.deposit event the Sender delivers.
type Deposit struct {
	// ID is the event's webhook-id, its key in the inbox.
	ID string
	// Account is the account credited.
	Account string
	// Cents is the amount credited, in cents.
	Cents int64
	// Version, when not 0, is the body's data.v: a sequenced route's order.
	Version int64
	// Type, when not empty, is the event's type instead of DepositType
	// (the ledger applies any type as a deposit; a route may differ).
	Type string
}

// Body returns the deposit's JSON body as the ledger example reads it.
func (d *Deposit) Body() []byte {
	typ := cmp.Or(d.Type, DepositType)
	if d.Version != 0 {
		return fmt.Appendf(nil, `{"type":%q,"data":{"account_id":%q,"amount":"%d.%02d","v":%d}}`,
			typ, d.Account, d.Cents/100, d.Cents%100, d.Version)
	}
	return fmt.Appendf(nil, `{"type":%q,"data":{"account_id":%q,"amount":"%d.%02d"}}`, typ, d.Account, d.Cents/100, d.Cents%100)
}

// Deposits returns n distinct deposits named after run, spread over as
// many accounts as the last argument says (acc_0 …), with amounts that
// differ from one another.
func Deposits(run string, n, accounts int) []Deposit {
	ds := make([]Deposit, n)
	for i := range ds {
		ds[i] = Deposit{ID: fmt.Sprintf("%s_%06d", run, i), Account: fmt.Sprintf("acc_%d", i%accounts), Cents: int64(100 + i)}
	}
	return ds
}

// Balances returns the balance each account must have once every deposit
// in ds was applied exactly once, formatted as numeric(14, 2) prints it.
func Balances(ds []Deposit) map[string]string {
	cents := map[string]int64{}
	for _, d := range ds {
		cents[d.Account] += d.Cents
	}
	out := make(map[string]string, len(cents))
	for account, c := range cents {
		out[account] = fmt.Sprintf("%d.%02d", c/100, c%100)
	}
	return out
}

// Sign returns the request that delivers d to url, signed with secret
// ("whsec_…") at time now as a Standard Webhooks provider signs it.
func Sign(ctx context.Context, url, secret string, d *Deposit, now time.Time) (*http.Request, error) {
	return webhook.NewRequest(ctx, url, &webhook.Params{Provider: "standardwebhooks", Secret: secret,
		EventID: d.ID, EventType: DepositType, Time: now, Body: d.Body()})
}

// Sender delivers deposits to receivers, round-robin, and retries each
// delivery that gets no answer or a non-2xx answer, as a provider does,
// until it is answered 2xx or the context ends.
type Sender struct {
	// Targets are the receivers' webhook URLs, tried in turn.
	Targets []string
	// Secret signs the deliveries.
	Secret string
	// Workers is the number of deliveries in flight at once. Defaults to 4.
	Workers int
	// Every is the pause a worker takes between two deliveries, to offer a
	// steady load rather than all it can. Defaults to none.
	Every time.Duration
	// Timeout bounds one attempt. Defaults to 10 s.
	Timeout time.Duration

	acked  atomic.Int64
	failed atomic.Int64
	next   atomic.Uint64
	hold   atomic.Pointer[hold]
}

// hold is an armed Hold: the attempt it catches, and the two channels.
type hold struct {
	acked   int64
	target  int
	taken   atomic.Bool
	held    chan struct{}
	release chan struct{}
}

// Ack is a delivery's successful attempt.
type Ack struct {
	// ID is the deposit's event id.
	ID string
	// Sent and Answered bound the attempt answered 2xx.
	Sent, Answered time.Time
	// Attempts counts the attempts, the successful one included.
	Attempts int
}

// Report is what a Sender's run saw.
type Report struct {
	// Acks are the deliveries answered 2xx, in the order of their answers.
	Acks []Ack
	// Answers counts the failed attempts by their answer: an HTTP status,
	// or "no answer".
	Answers map[string]int
	// Bodies holds the bodies of the non-2xx answers, for the secrets
	// check (at most 100).
	Bodies []string
	// LongestGap is the longest time between two successive 2xx answers.
	LongestGap time.Duration
}

// Acked returns the number of deliveries answered 2xx so far.
func (s *Sender) Acked() int64 { return s.acked.Load() }

// Failed returns the number of attempts that failed so far (no answer, or
// not 2xx).
func (s *Sender) Failed() int64 { return s.failed.Load() }

// Hold arms the sender to catch its first attempt to target that starts once
// Acked reaches acked: that attempt writes all of its request but the last
// byte and waits there, so the receiver has read the headers and is reading
// the body, at work on it. The returned channel is closed once the attempt
// waits; release lets it write the last byte (into a dead connection, when
// the receiver was killed meanwhile, which makes the attempt fail and be
// retried). One hold is armed at a time; Hold replaces an unused one.
//
// A kill timed this way lands on a receiver with a request in flight by
// construction: acked is below the deliveries left, so some attempt to
// target starts after it, whatever the machine's speed.
func (s *Sender) Hold(acked int64, target int) (held <-chan struct{}, release func()) {
	h := &hold{acked: acked, target: target, held: make(chan struct{}), release: make(chan struct{})}
	s.hold.Store(h)
	var once sync.Once
	return h.held, func() { once.Do(func() { close(h.release) }) }
}

// take returns the armed hold when this attempt to target is the one it
// catches, and claims it.
func (s *Sender) take(target int) *hold {
	h := s.hold.Load()
	if h == nil || h.target != target || s.acked.Load() < h.acked || !h.taken.CompareAndSwap(false, true) {
		return nil
	}
	return h
}

// client returns a one-connection client whose connection writes all but
// the last byte of the first request, closes h.held, and writes the last
// byte only once h.release is closed or ctx ends.
func (h *hold) client(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &heldConn{Conn: conn, ctx: ctx, h: h}, nil
		},
	}}
}

// heldConn is a connection whose first write is held before its last byte.
type heldConn struct {
	net.Conn
	ctx  context.Context
	h    *hold
	once sync.Once
}

func (c *heldConn) Write(p []byte) (int, error) {
	n := 0
	c.once.Do(func() {
		if len(p) < 2 {
			return
		}
		var err error
		if n, err = c.Conn.Write(p[:len(p)-1]); err != nil {
			return
		}
		close(c.h.held)
		select {
		case <-c.h.release:
		case <-c.ctx.Done():
		}
	})
	m, err := c.Conn.Write(p[n:])
	return n + m, err
}

// Run delivers ds and returns once every one is answered 2xx or ctx ends.
func (s *Sender) Run(ctx context.Context, ds []Deposit) *Report {
	client := &http.Client{Timeout: cmp.Or(s.Timeout, 10*time.Second),
		Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	defer client.CloseIdleConnections()
	rep := &Report{Answers: map[string]int{}}
	var mu sync.Mutex
	var last time.Time
	var next atomic.Int64
	var wg sync.WaitGroup
	for range cmp.Or(s.Workers, 4) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ds) || ctx.Err() != nil {
					return
				}
				ack, ok := s.deliver(ctx, client, &ds[i], func(answer, body string) {
					mu.Lock()
					defer mu.Unlock()
					rep.Answers[answer]++
					if body != "" && len(rep.Bodies) < 100 {
						rep.Bodies = append(rep.Bodies, body)
					}
				})
				if ok {
					s.acked.Add(1)
					mu.Lock()
					if !last.IsZero() {
						rep.LongestGap = max(rep.LongestGap, ack.Answered.Sub(last))
					}
					last = ack.Answered
					rep.Acks = append(rep.Acks, ack)
					mu.Unlock()
				}
				if s.Every > 0 {
					select {
					case <-ctx.Done():
					case <-time.After(s.Every):
					}
				}
			}
		})
	}
	wg.Wait()
	return rep
}

// deliver retries d until an attempt is answered 2xx, with a backoff from
// 10 ms doubling to 500 ms, reporting every failed attempt to failed.
func (s *Sender) deliver(ctx context.Context, client *http.Client, d *Deposit, failed func(answer, body string)) (Ack, bool) {
	backoff := 10 * time.Millisecond
	for attempt := 1; ; attempt++ {
		target := int(s.next.Add(1) % uint64(len(s.Targets)))
		sent := time.Now()
		status, body, err := s.attempt(ctx, client, target, d, sent)
		if err == nil && status/100 == 2 {
			return Ack{ID: d.ID, Sent: sent, Answered: time.Now(), Attempts: attempt}, true
		}
		s.failed.Add(1)
		if err != nil {
			failed("no answer", "")
		} else {
			failed(fmt.Sprint(status), body)
		}
		select {
		case <-ctx.Done():
			return Ack{}, false
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

func (s *Sender) attempt(ctx context.Context, client *http.Client, target int, d *Deposit, now time.Time) (int, string, error) {
	req, err := Sign(ctx, s.Targets[target], s.Secret, d, now)
	if err != nil {
		return 0, "", err
	}
	if h := s.take(target); h != nil {
		client = h.client(client.Timeout)
		defer client.CloseIdleConnections()
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode/100 == 2 {
		body = nil
	}
	return resp.StatusCode, string(body), err
}
