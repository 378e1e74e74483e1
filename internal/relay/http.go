package relay

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookinbox/hookinbox/internal/sign"
	"github.com/hookinbox/hookinbox/pkg/outbox"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

// HTTPTimeoutDefault is HTTPConfig.Timeout's default.
const HTTPTimeoutDefault = 10 * time.Second

// HTTPConfig configures an HTTP destination.
type HTTPConfig struct {
	// URL receives the POSTs. Required: an absolute http:// or https:// URL.
	URL string
	// Secret signs each request per Standard Webhooks ("whsec_<base64>").
	// Empty sends unsigned requests. It is revealed only to sign.
	Secret secret.String
	// Timeout bounds one request, from connecting to the answer's status.
	// Defaults to 10s.
	Timeout time.Duration
	// ContentType defaults to application/json.
	ContentType string
	// Client defaults to a client of its own with no redirects followed.
	Client *http.Client
	// Now is the clock of webhook-timestamp; defaults to time.Now.
	Now func() time.Time
}

// HTTP is a destination that POSTs each message's payload to a URL, signed
// with Standard Webhooks headers (webhook-id is the message's key,
// webhook-timestamp, webhook-signature "v1,<base64 HMAC-SHA256 of
// id.timestamp.body>") and with Idempotency-Key set to the key, so the
// receiving service can check it with any Standard Webhooks library and drop
// re-sends by key.
//
// A 2xx is success. 410 Gone disables the destination (DisableError). 408,
// 409, 425, 429 and 5xx are retried, honouring Retry-After (seconds or an
// HTTP date); any other status fails the message at once (PermanentError).
// Transport errors and timeouts are retried.
type HTTP struct {
	config HTTPConfig
}

// NewHTTP returns an HTTP destination.
func NewHTTP(config *HTTPConfig) (*HTTP, error) {
	c := *config
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("outbox: http destination URL %q is not an absolute http(s) URL", c.URL)
	}
	if c.Secret != "" {
		if _, err := sign.StandardWebhooks(c.Secret.Reveal(), "", time.Unix(0, 0), nil); err != nil {
			return nil, fmt.Errorf("outbox: http destination secret: %w", err)
		}
	}
	c.Timeout = cmp.Or(c.Timeout, HTTPTimeoutDefault)
	c.ContentType = cmp.Or(c.ContentType, "application/json")
	if c.Client == nil {
		c.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return &HTTP{config: c}, nil
}

// Deliver implements Destination.
func (h *HTTP) Deliver(ctx context.Context, r *outbox.Record) error {
	ctx, cancel := context.WithTimeout(ctx, h.config.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.config.URL, bytes.NewReader(r.Payload))
	if err != nil {
		return &outbox.PermanentError{Err: err}
	}
	for k, v := range r.Headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", h.config.ContentType)
	req.Header.Set("Idempotency-Key", r.Key)
	req.Header.Set("webhook-id", r.Key)
	now := h.config.Now()
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	if h.config.Secret != "" {
		sig, err := sign.StandardWebhooks(h.config.Secret.Reveal(), r.Key, now, r.Payload)
		if err != nil {
			return &outbox.PermanentError{Err: err}
		}
		req.Header.Set("webhook-signature", sig)
	}
	resp, err := h.config.Client.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", h.config.URL, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return statusError(resp, now)
}

// statusError maps an answer's status to the relay's outcomes.
func statusError(resp *http.Response, now time.Time) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	err := fmt.Errorf("POST answered %d %s", code, http.StatusText(code))
	switch {
	case code == http.StatusGone:
		return &outbox.DisableError{Err: err}
	case code == http.StatusRequestTimeout, code == http.StatusConflict, code == http.StatusTooEarly,
		code == http.StatusTooManyRequests, code >= 500:
		if after, ok := retryAfter(resp.Header.Get("Retry-After"), now); ok {
			return &outbox.RetryAfterError{After: after, Err: err}
		}
		return err
	}
	return &outbox.PermanentError{Err: err}
}

// retryAfter parses a Retry-After value: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
		return time.Duration(s) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

var _ outbox.Destination = (*HTTP)(nil)
