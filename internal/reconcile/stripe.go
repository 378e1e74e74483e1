package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/hookinbox/hookinbox/pkg/provider"
)

// The defaults NewStripe applies to a zero StripeConfig field.
const (
	// StripeBaseURLDefault is StripeConfig.BaseURL's default.
	StripeBaseURLDefault = "https://api.stripe.com"
	// StripePageSizeDefault is StripeConfig.PageSize's default, Stripe's
	// largest page.
	StripePageSizeDefault = 100
	// StripeMaxRetriesDefault is StripeConfig.MaxRetries's default.
	StripeMaxRetriesDefault = MaxRetriesDefault
	// StripeBackoffDefault is StripeConfig.Backoff's default: the first wait
	// after a 429 or 5xx that names none, doubled at each retry.
	StripeBackoffDefault = BackoffDefault
)

// EventParser reads one event object (an element of a list call) as the
// source's verifier reads a webhook body once its signature holds, so that a
// listed event is keyed exactly like its delivery. The stripe verifier
// provider.New returns is one; StripeParser returns it.
type EventParser interface {
	ParseEvent(body []byte) provider.Event
}

// StripeParser returns the stripe verifier configured by config, as the
// EventParser of StripeConfig.Parser.
func StripeParser(config *provider.Config) (EventParser, error) {
	return Parser("stripe", config)
}

// Parser returns the verifier of provider (stripe, paddle or square)
// configured by config, as the EventParser of its fetcher: the code that
// keys the provider's webhook deliveries keys its listed events.
func Parser(name string, config *provider.Config) (EventParser, error) {
	verifier, err := provider.New(name, config)
	if err != nil {
		return nil, err
	}
	parser, ok := verifier.(EventParser)
	if !ok {
		return nil, fmt.Errorf("reconcile: the %s verifier parses no listed events", name)
	}
	return parser, nil
}

// StripeConfig configures a Stripe fetcher.
type StripeConfig struct {
	// APIKey is a restricted key (rk_…) with read access to events, sent as
	// a bearer token. Required.
	APIKey string
	// BaseURL is the API's root. Defaults to https://api.stripe.com; tests
	// point it at an httptest server.
	BaseURL string
	// Parser keys each listed event like the source's webhook deliveries
	// (its twin types): StripeParser of the source's config. Required.
	Parser EventParser
	// PageSize is the limit of each list call, 1 to 100. Defaults to 100.
	PageSize int
	// MaxRetries is how many times one page is asked again after a 429 or
	// a 5xx. Defaults to 5.
	MaxRetries int
	// Backoff is the first wait after a 429 or 5xx that names none
	// (Retry-After), doubled at each retry, with jitter. Defaults to 500ms.
	Backoff time.Duration
	// HTTPClient defaults to a client with a 30s timeout.
	HTTPClient *http.Client
	// Sleep waits d or until ctx ends. Defaults to a timer; tests inject
	// one that records the waits.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock a Retry-After is read against. Defaults to
	// time.Now.
	Now func() time.Time
}

// Stripe lists a Stripe account's events with GET /v1/events.
type Stripe struct {
	config StripeConfig
	api    *apiClient
}

// NewStripe returns a Stripe fetcher.
func NewStripe(config *StripeConfig) (*Stripe, error) {
	c := *config
	if c.APIKey == "" {
		return nil, errors.New("reconcile: stripe: APIKey is required")
	}
	if c.Parser == nil {
		return nil, errors.New("reconcile: stripe: Parser is required")
	}
	var err error
	if c.BaseURL, c.PageSize, err = listing("stripe", c.BaseURL, StripeBaseURLDefault, c.PageSize, StripePageSizeDefault, 100); err != nil {
		return nil, err
	}
	retry := RetryConfig{MaxRetries: c.MaxRetries, Backoff: c.Backoff, HTTPClient: c.HTTPClient, Sleep: c.Sleep, Now: c.Now}.withDefaults()
	api := &apiClient{
		name: "stripe", retry: retry, describe: stripeErrorMessage,
		auth: func(req *http.Request) error { req.Header.Set("Authorization", "Bearer "+c.APIKey); return nil },
	}
	return &Stripe{config: c, api: api}, nil
}

// stripeList is a page of GET /v1/events.
type stripeList struct {
	Object  string            `json:"object"`
	Data    []json.RawMessage `json:"data"`
	HasMore bool              `json:"has_more"`
}

// Fetch implements Fetcher: it lists the events created within window,
// newest first (Stripe's order), following starting_after while has_more.
func (s *Stripe) Fetch(ctx context.Context, window Window, page func([]Fetched) error) error {
	after := ""
	for {
		list, err := s.list(ctx, window, after)
		if err != nil {
			return err
		}
		fetched := make([]Fetched, 0, len(list.Data))
		last := ""
		for _, raw := range list.Data {
			f := parsed(s.config.Parser, raw)
			var head struct {
				ID      string `json:"id"`
				Created int64  `json:"created"`
			}
			if json.Unmarshal(raw, &head) == nil && head.ID != "" {
				last = head.ID
				f.At = time.Unix(head.Created, 0)
			}
			fetched = append(fetched, f)
		}
		if len(fetched) > 0 {
			if err := page(fetched); err != nil {
				return err
			}
		}
		if !list.HasMore {
			return nil
		}
		if last == "" || last == after {
			return fmt.Errorf("reconcile: stripe: has_more without a new last event id to continue after")
		}
		after = last
	}
}

// list gets one page, retrying 429s and 5xx with backoff.
func (s *Stripe) list(ctx context.Context, window Window, after string) (*stripeList, error) {
	q := url.Values{}
	q.Set("created[gte]", strconv.FormatInt(window.Since.Unix(), 10))
	if !window.Until.IsZero() {
		q.Set("created[lte]", strconv.FormatInt(window.Until.Unix(), 10))
	}
	q.Set("limit", strconv.Itoa(s.config.PageSize))
	if after != "" {
		q.Set("starting_after", after)
	}
	ans, err := s.api.do(ctx, apiCall{method: http.MethodGet, url: s.config.BaseURL + "/v1/events?" + q.Encode(), label: "GET /v1/events"})
	if err != nil {
		return nil, err
	}
	var list stripeList
	if err := json.Unmarshal(ans.body, &list); err != nil {
		return nil, fmt.Errorf("reconcile: stripe: decode the events list: %w", err)
	}
	if list.Object != "list" {
		return nil, fmt.Errorf("reconcile: stripe: the answer is not a list (object %q)", list.Object)
	}
	return &list, nil
}

// stripeErrorMessage extracts error.message from a Stripe error answer.
func stripeErrorMessage(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	return "no error message"
}
