package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
)

// Response is a receiver's answer to Deliver.
type Response struct {
	StatusCode int
	Body       []byte
}

// NewRequest returns the POST to url that delivers params.Body signed as
// params.Provider would sign it (Sign), ready to send.
func NewRequest(ctx context.Context, url string, params *Params) (*http.Request, error) {
	signed, err := Sign(params)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(signed.Body))
	if err != nil {
		return nil, err
	}
	req.Header = signed.Header
	return req, nil
}

// Deliver signs params.Body as params.Provider would (Sign) and POSTs it to
// url, the way the provider delivers a webhook. Nothing is sent when signing
// fails. client may be nil for http.DefaultClient.
func Deliver(ctx context.Context, client *http.Client, url string, params *Params) (*Response, error) {
	req, err := NewRequest(ctx, url, params)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	return &Response{StatusCode: resp.StatusCode, Body: body}, nil
}
