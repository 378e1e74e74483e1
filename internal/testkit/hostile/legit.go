package hostile

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookinbox/hookinbox/internal/sign"
)

// LegitAddr is the local address the legit client sends from by default,
// so that a receiver tells it apart from attackers on 127.0.0.1 as it
// would tell a provider's address from an attacker's.
const LegitAddr = "127.0.0.2"

// AttackerAddr is the local address the attacks come from. A legit client
// sending from it (Legit.From) is one no receiver can tell from the
// attackers: what a proxy that is not trusted, a load balancer that does
// not pass the client address, or NAT makes of every client.
const AttackerAddr = "127.0.0.1"

// Legit sends signed Stripe deliveries one after another, as a provider
// would, and records how each was answered.
type Legit struct {
	// URL is the Stripe source's endpoint.
	URL string
	// Secret signs the deliveries.
	Secret string
	// Every is the time between the starts of two deliveries.
	Every time.Duration
	// Count is how many deliveries are sent.
	Count int
	// Timeout bounds each delivery.
	Timeout time.Duration
	// MaxConns caps the connections open at once, as a provider's sender
	// pool does: a delivery due while MaxConns are busy waits for one, and
	// the wait counts in its latency. Defaults to LegitMaxConnsDefault.
	MaxConns int
	// From is the local address the deliveries are sent from. Defaults to
	// LegitAddr; AttackerAddr puts the legit client on the attackers'
	// address.
	From string
}

// LegitMaxConnsDefault is Legit.MaxConns's default.
const LegitMaxConnsDefault = 16

// LegitResult is what the legit client saw.
type LegitResult struct {
	Sent, OK  int
	Latencies []time.Duration // of the deliveries answered 2xx
	Failures  map[string]int  // answer or error → count
}

// Success is the share of deliveries answered 2xx.
func (r *LegitResult) Success() float64 {
	if r.Sent == 0 {
		return 0
	}
	return float64(r.OK) / float64(r.Sent)
}

// Quantile is the q-quantile of the 2xx latencies.
func (r *LegitResult) Quantile(q float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	l := slices.Clone(r.Latencies)
	slices.Sort(l)
	return l[min(len(l)-1, int(q*float64(len(l))))]
}

func (r *LegitResult) String() string {
	return fmt.Sprintf("legit %d/%d ok (%.1f %%), p50 %s, p99 %s, failures %v",
		r.OK, r.Sent, 100*r.Success(), r.Quantile(0.5).Round(time.Millisecond), r.Quantile(0.99).Round(time.Millisecond), r.Failures)
}

// Run sends the deliveries and returns what happened. It stops early when
// ctx ends.
func (l *Legit) Run(ctx context.Context) *LegitResult {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(cmp.Or(l.From, LegitAddr))}, Timeout: l.Timeout}
	maxConns := cmp.Or(l.MaxConns, LegitMaxConnsDefault)
	client := &http.Client{Timeout: l.Timeout, Transport: &http.Transport{DialContext: dialer.DialContext,
		MaxConnsPerHost: maxConns, MaxIdleConnsPerHost: maxConns}}
	defer client.CloseIdleConnections()
	res := &LegitResult{Failures: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	tick := time.NewTicker(l.Every)
	defer tick.Stop()
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	for i := range l.Count {
		if i > 0 {
			select {
			case <-ctx.Done():
				wg.Wait()
				return res
			case <-tick.C:
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			latency, failure := l.send(ctx, client, fmt.Sprintf("evt_%s_%d", run, i))
			mu.Lock()
			defer mu.Unlock()
			res.Sent++
			if failure == "" {
				res.OK++
				res.Latencies = append(res.Latencies, latency)
			} else {
				res.Failures[failure]++
			}
		}()
	}
	wg.Wait()
	return res
}

func (l *Legit) send(ctx context.Context, client *http.Client, id string) (time.Duration, string) {
	body := []byte(`{"id":"` + id + `","type":"payment_intent.succeeded","data":{"object":{"id":"pi_` + id + `"}}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.URL, strings.NewReader(string(body)))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Stripe-Signature", sign.Stripe(l.Secret, time.Now(), body))
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, errorKind(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return 0, resp.Status
	}
	return time.Since(start), ""
}

// errorKind shortens a client error to what went wrong.
func errorKind(err error) string {
	s := err.Error()
	for _, kind := range []string{"connection reset", "broken pipe", "closed network connection", "EOF", "timeout", "deadline exceeded", "refused", "too many open files"} {
		if strings.Contains(s, kind) {
			return kind
		}
	}
	return s
}
