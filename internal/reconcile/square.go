package reconcile

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// The defaults NewSquare applies to a zero SquareConfig field.
const (
	// SquareBaseURLDefault is SquareConfig.BaseURL's default (the sandbox
	// is https://connect.squareupsandbox.com).
	SquareBaseURLDefault = "https://connect.squareup.com"
	// SquareVersionDefault is SquareConfig.Version's default: the
	// Square-Version header, which shapes the listed events' data.
	SquareVersionDefault = "2025-01-23"
	// SquarePageSizeDefault is SquareConfig.PageSize's default, Square's
	// largest page.
	SquarePageSizeDefault = 100
)

// SquareConfig configures a Square fetcher.
type SquareConfig struct {
	// AccessToken is the application's access token, sent as a bearer
	// token. Required.
	AccessToken string
	// BaseURL is the API's root. Defaults to https://connect.squareup.com.
	BaseURL string
	// Version is the Square-Version header. Defaults to
	// SquareVersionDefault; set it to the webhook subscription's API
	// version, so that listed events look like delivered ones.
	Version string
	// Parser keys each listed event like the source's webhook deliveries:
	// Parser("square", …) of the source's config. Required.
	Parser EventParser
	// PageSize is the limit of each call, 1 to 100. Defaults to 100.
	PageSize int
	// Retry is how 429s, 5xx and rate limits are retried; its Now defaults
	// to Now.
	Retry RetryConfig
	// Now is the end of each run's window. Defaults to time.Now.
	Now func() time.Time
}

// Square lists a Square seller's events with SearchEvents (POST
// /v2/events), filtered on created_at, oldest first, following the cursor.
type Square struct {
	config SquareConfig
	api    *apiClient
}

// NewSquare returns a Square fetcher.
func NewSquare(config *SquareConfig) (*Square, error) {
	c := *config
	if c.AccessToken == "" {
		return nil, errors.New("reconcile: square: AccessToken is required")
	}
	if c.Parser == nil {
		return nil, errors.New("reconcile: square: Parser is required")
	}
	c.Version = cmp.Or(c.Version, SquareVersionDefault)
	var err error
	if c.BaseURL, c.PageSize, err = listing("square", c.BaseURL, SquareBaseURLDefault, c.PageSize, SquarePageSizeDefault, 100); err != nil {
		return nil, err
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Retry.Now == nil {
		c.Retry.Now = c.Now
	}
	api := &apiClient{
		name: "square", retry: c.Retry.withDefaults(), describe: squareErrorMessage,
		auth: func(req *http.Request) error {
			req.Header.Set("Authorization", "Bearer "+c.AccessToken)
			req.Header.Set("Square-Version", c.Version)
			return nil
		},
	}
	return &Square{config: c, api: api}, nil
}

// squareSearch is SearchEvents' request body.
type squareSearch struct {
	Cursor string      `json:"cursor,omitempty"`
	Limit  int         `json:"limit"`
	Query  squareQuery `json:"query"`
}

type squareQuery struct {
	Filter struct {
		CreatedAt struct {
			StartAt string `json:"start_at"`
			EndAt   string `json:"end_at"`
		} `json:"created_at"`
	} `json:"filter"`
	Sort struct {
		Field string `json:"field"`
		Order string `json:"order"`
	} `json:"sort"`
}

// squareEvents is SearchEvents' answer.
type squareEvents struct {
	Events []json.RawMessage `json:"events"`
	Cursor string            `json:"cursor"`
}

// Fetch implements Fetcher. Every page repeats the original query, as
// Square requires with a cursor.
func (s *Square) Fetch(ctx context.Context, window Window, page func([]Fetched) error) error {
	search := squareSearch{Limit: s.config.PageSize}
	search.Query.Filter.CreatedAt.StartAt = window.Since.UTC().Format(time.RFC3339)
	end := window.Until
	if end.IsZero() {
		end = s.config.Now()
	}
	search.Query.Filter.CreatedAt.EndAt = end.UTC().Format(time.RFC3339)
	search.Query.Sort.Field, search.Query.Sort.Order = "DEFAULT", "ASC"
	for {
		body, err := json.Marshal(search)
		if err != nil {
			return fmt.Errorf("reconcile: square: %w", err)
		}
		ans, err := s.api.do(ctx, apiCall{method: http.MethodPost, url: s.config.BaseURL + "/v2/events", label: "POST /v2/events", body: body})
		if err != nil {
			return err
		}
		var list squareEvents
		if err := json.Unmarshal(ans.body, &list); err != nil {
			return fmt.Errorf("reconcile: square: decode the events: %w", err)
		}
		fetched := make([]Fetched, 0, len(list.Events))
		for _, raw := range list.Events {
			f := parsed(s.config.Parser, raw)
			var head struct {
				CreatedAt time.Time `json:"created_at"`
			}
			if json.Unmarshal(raw, &head) == nil {
				f.At = head.CreatedAt
			}
			fetched = append(fetched, f)
		}
		if len(fetched) > 0 {
			if err := page(fetched); err != nil {
				return err
			}
		}
		if list.Cursor == "" {
			return nil
		}
		if list.Cursor == search.Cursor {
			return errors.New("reconcile: square: the same cursor twice")
		}
		search.Cursor = list.Cursor
	}
}

// squareErrorMessage extracts the first error's detail from a Square error
// answer.
func squareErrorMessage(body []byte) string {
	var e struct {
		Errors []struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Errors) > 0 {
		return e.Errors[0].Code + ": " + e.Errors[0].Detail
	}
	return "no error message"
}
