package faults

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookinbox/hookinbox/pkg/provider"
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
}

// Body returns the deposit's JSON body as the ledger example reads it.
func (d *Deposit) Body() []byte {
	return fmt.Appendf(nil, `{"type":%q,"data":{"account_id":%q,"amount":"%d.%02d"}}`, DepositType, d.Account, d.Cents/100, d.Cents%100)
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
	return provider.NewSignedRequest(ctx, url, &provider.SignParams{Provider: "standardwebhooks", Secret: secret,
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

	acked    atomic.Int64
	attempts atomic.Int64
	inFlight []atomic.Int64 // per target
	next     atomic.Uint64
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

// Attempts returns the number of attempts answered or failed so far.
func (s *Sender) Attempts() int64 { return s.attempts.Load() }

// InFlight returns the attempts in flight to target i.
func (s *Sender) InFlight(i int) int64 { return s.inFlight[i].Load() }

// Init prepares the counters that Acked and InFlight read; Run calls it,
// and a caller that polls them before Run starts calls it first.
func (s *Sender) Init() {
	if s.inFlight == nil {
		s.inFlight = make([]atomic.Int64, len(s.Targets))
	}
}

// Run delivers ds and returns once every one is answered 2xx or ctx ends.
func (s *Sender) Run(ctx context.Context, ds []Deposit) *Report {
	s.Init()
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
	s.inFlight[target].Add(1)
	defer s.inFlight[target].Add(-1)
	defer s.attempts.Add(1)
	req, err := Sign(ctx, s.Targets[target], s.Secret, d, now)
	if err != nil {
		return 0, "", err
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
