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

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// The defaults NewPaddle applies to a zero PaddleConfig field.
const (
	// PaddleBaseURLDefault is PaddleConfig.BaseURL's default (the sandbox
	// is https://sandbox-api.paddle.com).
	PaddleBaseURLDefault = "https://api.paddle.com"
	// PaddlePageSizeDefault is PaddleConfig.PageSize's default, Paddle's
	// largest page.
	PaddlePageSizeDefault = 200
)

// PaddleConfig configures a Paddle fetcher.
type PaddleConfig struct {
	// APIKey is a Paddle Billing API key with read access to events, sent
	// as a bearer token. Required.
	APIKey string
	// BaseURL is the API's root. Defaults to https://api.paddle.com.
	BaseURL string
	// Parser keys each listed event like the source's webhook deliveries:
	// Parser("paddle", …) of the source's config. Required.
	Parser EventParser
	// PageSize is per_page, 1 to 200. Defaults to 200.
	PageSize int
	// Retry is how 429s and 5xx are retried.
	Retry RetryConfig
}

// Paddle lists a Paddle Billing account's events with GET /events, newest
// first (order_by=id[DESC]), following the after cursor (an event id) while
// meta.pagination.has_more, until an event occurred before the window.
type Paddle struct {
	config PaddleConfig
	api    *apiClient
}

// NewPaddle returns a Paddle fetcher.
func NewPaddle(config *PaddleConfig) (*Paddle, error) {
	c := *config
	if c.APIKey == "" {
		return nil, errors.New("reconcile: paddle: APIKey is required")
	}
	if c.Parser == nil {
		return nil, errors.New("reconcile: paddle: Parser is required")
	}
	var err error
	if c.BaseURL, c.PageSize, err = listing("paddle", c.BaseURL, PaddleBaseURLDefault, c.PageSize, PaddlePageSizeDefault, 200); err != nil {
		return nil, err
	}
	api := &apiClient{
		name: "paddle", retry: c.Retry.withDefaults(), describe: paddleErrorMessage,
		auth: func(req *http.Request) error { req.Header.Set("Authorization", "Bearer "+c.APIKey); return nil },
	}
	return &Paddle{config: c, api: api}, nil
}

// paddleList is a page of GET /events.
type paddleList struct {
	Data []json.RawMessage `json:"data"`
	Meta struct {
		Pagination struct {
			HasMore bool `json:"has_more"`
		} `json:"pagination"`
	} `json:"meta"`
}

// Fetch implements Fetcher.
func (p *Paddle) Fetch(ctx context.Context, window Window, page func([]Fetched) error) error {
	after := ""
	for {
		list, err := p.list(ctx, after)
		if err != nil {
			return err
		}
		fetched := make([]Fetched, 0, len(list.Data))
		last, done := "", false
		for _, raw := range list.Data {
			var head struct {
				EventID    string    `json:"event_id"`
				OccurredAt time.Time `json:"occurred_at"`
			}
			if err := json.Unmarshal(raw, &head); err != nil || head.EventID == "" {
				return fmt.Errorf("reconcile: paddle: an event without event_id and occurred_at: %s", truncate(raw))
			}
			last = head.EventID
			if head.OccurredAt.Before(window.Since) {
				// Newest first: every later event is older still.
				done = true
				break
			}
			if window.after(head.OccurredAt) {
				continue
			}
			f := parsed(p.config.Parser, raw)
			f.At = head.OccurredAt
			fetched = append(fetched, f)
		}
		if len(fetched) > 0 {
			if err := page(fetched); err != nil {
				return err
			}
		}
		if done || !list.Meta.Pagination.HasMore {
			return nil
		}
		if last == "" || last == after {
			return errors.New("reconcile: paddle: has_more without a new last event id to continue after")
		}
		after = last
	}
}

func (p *Paddle) list(ctx context.Context, after string) (*paddleList, error) {
	q := url.Values{}
	q.Set("order_by", "id[DESC]")
	q.Set("per_page", strconv.Itoa(p.config.PageSize))
	if after != "" {
		q.Set("after", after)
	}
	ans, err := p.api.do(ctx, apiCall{method: http.MethodGet, url: p.config.BaseURL + "/events?" + q.Encode(), label: "GET /events"})
	if err != nil {
		return nil, err
	}
	var list paddleList
	if err := json.Unmarshal(ans.body, &list); err != nil {
		return nil, fmt.Errorf("reconcile: paddle: decode the events list: %w", err)
	}
	return &list, nil
}

// paddleErrorMessage extracts error.detail from a Paddle error answer.
func paddleErrorMessage(body []byte) string {
	var e struct {
		Error struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Detail != "" {
		return e.Error.Code + ": " + e.Error.Detail
	}
	return "no error message"
}

// parsed keys one listed event with parser.
func parsed(parser EventParser, raw []byte) Fetched {
	ev := parser.ParseEvent(raw)
	return Fetched{
		Event: inboxstore.IncomingEvent{ID: ev.ID, Type: ev.Type, Payload: ev.Payload, TwinKey: ev.TwinKey, ParseError: ev.ParseError},
		Raw:   raw,
	}
}

// truncate shortens raw for an error message.
func truncate(raw []byte) string {
	const n = 120
	if len(raw) <= n {
		return string(raw)
	}
	return string(raw[:n]) + "…"
}
