package reconcile

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The defaults every fetcher applies to a zero retry field.
const (
	// MaxRetriesDefault is how many times one call is made again after a
	// 429 or a 5xx, by default.
	MaxRetriesDefault = 5
	// BackoffDefault is the first wait after a 429 or 5xx that names none
	// (Retry-After), doubled at each retry, by default.
	BackoffDefault = 500 * time.Millisecond
	// maxBackoff caps one wait in a run: a rate limit that names a later
	// time (or outlasts the retries) ends the run with a RateLimitedError,
	// which the worker turns into a snooze until that time.
	maxBackoff = time.Minute
	// secondaryWait is GitHub's documented least wait after a secondary
	// rate limit that names no time.
	secondaryWait = time.Minute
	// maxAnswer bounds one answer's body.
	maxAnswer = 32 << 20
)

// RetryConfig is how a fetcher calls its provider's API: the retries of a
// 429 (rate limited) or 5xx (outage) answer, and the client and clock.
type RetryConfig struct {
	// MaxRetries is how many times one call is made again after a 429 or a
	// 5xx; then the run gives up (and moves no watermark). Defaults to 5.
	MaxRetries int
	// Backoff is the first wait after a 429 or 5xx that names none
	// (Retry-After), doubled at each retry, with jitter; each wait is capped
	// at a minute. Defaults to 500ms.
	Backoff time.Duration
	// HTTPClient defaults to a client with a 30s timeout.
	HTTPClient *http.Client
	// Sleep waits d or until ctx ends. Defaults to a timer; tests inject
	// one that records the waits.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock a rate limit's reset time is read against. Defaults
	// to time.Now (GitHub's and Square's: their config's Now).
	Now func() time.Time
}

// withDefaults returns a copy of c with its zero fields at their defaults.
func (c RetryConfig) withDefaults() RetryConfig {
	if c.MaxRetries == 0 {
		c.MaxRetries = MaxRetriesDefault
	}
	if c.Backoff == 0 {
		c.Backoff = BackoffDefault
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if c.Sleep == nil {
		c.Sleep = sleep
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// apiClient calls one provider's API, retrying 429s and 5xx and keeping
// off the API until a rate limit's reset.
type apiClient struct {
	name  string // "stripe", in errors
	retry RetryConfig
	// auth sets the request's credentials and version headers.
	auth func(req *http.Request) error
	// describe extracts the provider's error message from an answer.
	describe func(body []byte) string

	mu        sync.Mutex
	notBefore time.Time // a 2xx said no request is left until then
}

// apiCall is one request.
type apiCall struct {
	method, url, label string // label: "GET /v1/events", in errors
	body               []byte
}

// answer is a 2xx answer.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// retryableError is a 429 or 5xx answer (or GitHub's rate-limited 403);
// until is the earliest time the answer allows the next call, zero when
// it names none.
type retryableError struct {
	name, label string
	status      int
	limited     bool
	until       time.Time
	secondary   bool      // GitHub's secondary rate limit
	at          time.Time // when the answer came
}

func (e *retryableError) Error() string {
	return fmt.Sprintf("reconcile: %s: %s answered %d", e.name, e.label, e.status)
}

// RateLimitedError ends a run that its provider rate limits for longer
// than a run waits (a minute), or past its retries: the worker snoozes the
// job until Until, which does not count as a failed attempt.
type RateLimitedError struct {
	// Provider and Call name the refused request ("github", "GET /…").
	Provider, Call string
	// Until is when the provider allows the next call.
	Until time.Time
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("reconcile: %s: %s rate limited until %s", e.Provider, e.Call, e.Until.UTC().Format(time.RFC3339))
}

// do makes call, again after a 429 or 5xx up to MaxRetries times. A rate
// limit is waited out until the time it names (Retry-After, or GitHub's
// X-RateLimit-Reset when X-RateLimit-Remaining is 0), or else a jittered
// doubling backoff; one that names a time more than a minute away, or that
// outlasts the retries, is returned as a *RateLimitedError.
func (c *apiClient) do(ctx context.Context, call apiCall) (*answer, error) {
	wait, secondary := c.retry.Backoff, secondaryWait
	for attempt := 0; ; attempt++ {
		if err := c.keepOff(ctx, call); err != nil {
			return nil, err
		}
		ans, err := c.once(ctx, call)
		if err == nil {
			return ans, nil
		}
		var retryable *retryableError
		if !errors.As(err, &retryable) {
			return nil, err
		}
		now := retryable.at
		d := retryable.until.Sub(now)
		switch {
		case !retryable.until.IsZero():
		case retryable.secondary:
			// GitHub: at least a minute, doubling while it lasts.
			d, secondary = secondary, secondary*2
		default:
			// Full jitter around the doubling wait, so that replicas do not
			// retry in step.
			d = wait/2 + rand.N(wait/2+1) //nolint:gosec // jitter between replicas, not a secret
			wait = min(wait*2, maxBackoff)
		}
		switch {
		case retryable.limited && (d > maxBackoff || attempt >= c.retry.MaxRetries):
			return nil, &RateLimitedError{Provider: c.name, Call: call.label, Until: now.Add(max(d, 0))}
		case attempt >= c.retry.MaxRetries:
			return nil, err
		}
		if err := c.retry.Sleep(ctx, min(d, maxBackoff)); err != nil {
			return nil, err
		}
	}
}

// keepOff waits until the reset a 2xx announced with X-RateLimit-Remaining
// 0, or returns a *RateLimitedError when it is more than a minute away.
func (c *apiClient) keepOff(ctx context.Context, call apiCall) error {
	c.mu.Lock()
	until := c.notBefore
	c.mu.Unlock()
	d := until.Sub(c.retry.Now())
	switch {
	case d <= 0:
		return nil
	case d > maxBackoff:
		return &RateLimitedError{Provider: c.name, Call: call.label, Until: until}
	}
	return c.retry.Sleep(ctx, d)
}

func (c *apiClient) once(ctx context.Context, call apiCall) (*answer, error) {
	var body io.Reader
	if call.body != nil {
		body = bytes.NewReader(call.body)
	}
	req, err := http.NewRequestWithContext(ctx, call.method, call.url, body)
	if err != nil {
		return nil, fmt.Errorf("reconcile: %s: %w", c.name, err)
	}
	if call.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.auth(req); err != nil {
		return nil, fmt.Errorf("reconcile: %s: %w", c.name, err)
	}
	resp, err := c.retry.HTTPClient.Do(req)
	if err != nil {
		// The error names the URL, never the key (it is in a header).
		return nil, fmt.Errorf("reconcile: %s: %w", c.name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reconcile: %s: read answer: %w", c.name, err)
	}
	now := c.retry.Now()
	limited := rateLimited(resp.StatusCode, resp.Header, raw)
	switch {
	case limited || resp.StatusCode >= 500:
		return nil, &retryableError{name: c.name, label: call.label, status: resp.StatusCode, limited: limited,
			until: limitEnd(resp.Header, now), secondary: limited && secondaryLimit(raw), at: now}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, fmt.Errorf("reconcile: %s: %s answered %d: %s", c.name, call.label, resp.StatusCode, c.describe(raw))
	}
	if resp.Header.Get("X-RateLimit-Remaining") == "0" {
		c.mu.Lock()
		c.notBefore = limitEnd(resp.Header, now)
		c.mu.Unlock()
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: raw}, nil
}

// rateLimited reports a rate limit: a 429 (every provider), or GitHub's
// 403 with Retry-After, with no request left (X-RateLimit-Remaining 0) or
// with a message that says so (a secondary rate limit).
func rateLimited(status int, h http.Header, body []byte) bool {
	return status == http.StatusTooManyRequests ||
		status == http.StatusForbidden && (h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0" ||
			bytes.Contains(bytes.ToLower(body), []byte("rate limit")))
}

// secondaryLimit reports GitHub's message of a secondary rate limit, after
// which GitHub says to wait at least a minute when no header names a time.
func secondaryLimit(body []byte) bool {
	return bytes.Contains(bytes.ToLower(body), []byte("secondary rate limit"))
}

// limitEnd is the earliest time an answer allows the next call: the later
// of its Retry-After (seconds or an HTTP date) and, when
// X-RateLimit-Remaining is 0, its X-RateLimit-Reset (unix seconds); zero
// when it names neither.
func limitEnd(h http.Header, now time.Time) time.Time {
	var until time.Time
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			until = now.Add(time.Duration(n) * time.Second)
		} else if at, err := http.ParseTime(v); err == nil {
			until = at
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if n, err := strconv.ParseInt(strings.TrimSpace(h.Get("X-RateLimit-Reset")), 10, 64); err == nil {
			if reset := time.Unix(n, 0); reset.After(until) {
				until = reset
			}
		}
	}
	return until
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// listing applies a list API's defaults: the base URL (without a trailing
// slash) and the page size, which must be 1 to maxPage.
func listing(name, baseURL, baseDefault string, pageSize, pageDefault, maxPage int) (string, int, error) {
	pageSize = cmp.Or(pageSize, pageDefault)
	if pageSize < 1 || pageSize > maxPage {
		return "", 0, fmt.Errorf("reconcile: %s: PageSize must be 1 to %d, not %d", name, maxPage, pageSize)
	}
	return strings.TrimSuffix(cmp.Or(baseURL, baseDefault), "/"), pageSize, nil
}
