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
	// maxBackoff caps one wait, Retry-After included.
	maxBackoff = time.Minute
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
	return c
}

// apiClient calls one provider's API, retrying 429s and 5xx.
type apiClient struct {
	name  string // "stripe", in errors
	retry RetryConfig
	// auth sets the request's credentials and version headers.
	auth func(req *http.Request) error
	// describe extracts the provider's error message from an answer.
	describe func(body []byte) string
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

// retryableError is a 429 or 5xx answer.
type retryableError struct {
	name, label string
	status      int
}

func (e *retryableError) Error() string {
	return fmt.Sprintf("reconcile: %s: %s answered %d", e.name, e.label, e.status)
}

// do makes call, again after a 429 or 5xx up to MaxRetries times, waiting
// the answer's Retry-After or else a jittered doubling backoff.
func (c *apiClient) do(ctx context.Context, call apiCall) (*answer, error) {
	wait := c.retry.Backoff
	for attempt := 0; ; attempt++ {
		ans, retryAfter, err := c.once(ctx, call)
		if err == nil {
			return ans, nil
		}
		var retryable *retryableError
		if !errors.As(err, &retryable) || attempt >= c.retry.MaxRetries {
			return nil, err
		}
		d := retryAfter
		if d == 0 {
			// Full jitter around the doubling wait, so that replicas do not
			// retry in step.
			d = wait/2 + rand.N(wait/2+1) //nolint:gosec // jitter between replicas, not a secret
			wait = min(wait*2, maxBackoff)
		}
		if err := c.retry.Sleep(ctx, min(d, maxBackoff)); err != nil {
			return nil, err
		}
	}
}

func (c *apiClient) once(ctx context.Context, call apiCall) (*answer, time.Duration, error) {
	var body io.Reader
	if call.body != nil {
		body = bytes.NewReader(call.body)
	}
	req, err := http.NewRequestWithContext(ctx, call.method, call.url, body)
	if err != nil {
		return nil, 0, fmt.Errorf("reconcile: %s: %w", c.name, err)
	}
	if call.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if err := c.auth(req); err != nil {
		return nil, 0, fmt.Errorf("reconcile: %s: %w", c.name, err)
	}
	resp, err := c.retry.HTTPClient.Do(req)
	if err != nil {
		// The error names the URL, never the key (it is in a header).
		return nil, 0, fmt.Errorf("reconcile: %s: %w", c.name, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, 0, fmt.Errorf("reconcile: %s: read answer: %w", c.name, err)
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 || rateLimited403(resp):
		return nil, retryAfter(resp.Header.Get("Retry-After")), &retryableError{name: c.name, label: call.label, status: resp.StatusCode}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, 0, fmt.Errorf("reconcile: %s: %s answered %d: %s", c.name, call.label, resp.StatusCode, c.describe(raw))
	}
	return &answer{status: resp.StatusCode, header: resp.Header, body: raw}, 0, nil
}

// rateLimited403 is GitHub's way of saying 429: a 403 with Retry-After
// (a secondary rate limit) or with no request left (X-RateLimit-Remaining 0).
func rateLimited403(resp *http.Response) bool {
	return resp.StatusCode == http.StatusForbidden &&
		(resp.Header.Get("Retry-After") != "" || resp.Header.Get("X-RateLimit-Remaining") == "0")
}

// retryAfter reads a Retry-After header in seconds; 0 when absent or not a
// number of seconds.
func retryAfter(v string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0
	}
	return time.Duration(n) * time.Second
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
