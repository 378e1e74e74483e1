package provider

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
)

// DeliveryResponse is a receiver's answer to Deliver.
type DeliveryResponse struct {
	StatusCode int
	Body       []byte
}

// NewSignedRequest returns the POST to url that delivers params.Body signed
// as params.Provider would sign it (Sign), ready to send.
func NewSignedRequest(ctx context.Context, url string, params *SignParams) (*http.Request, error) {
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
// fails. It serves inboxctl send, the demo and load generators. client may
// be nil for http.DefaultClient.
func Deliver(ctx context.Context, client *http.Client, url string, params *SignParams) (*DeliveryResponse, error) {
	req, err := NewSignedRequest(ctx, url, params)
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
	return &DeliveryResponse{StatusCode: resp.StatusCode, Body: body}, nil
}
