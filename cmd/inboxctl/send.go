package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// send signs one delivery as the source's provider would, with the source's
// first secret and credentials, and POSTs it to the receiver.
func send(ctx context.Context, cfg *config.Config, args []string) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	source := fs.String("source", "", "source name (required)")
	id := fs.String("id", "", "event id, for providers that send it in a header")
	typ := fs.String("type", "", "event type, for providers that send it in a header")
	data := fs.String("data", "", "raw body (required): JSON, or form parameters for twilio")
	url := fs.String("url", "", "receiver base URL (default: http://<receiver.listen>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("send: unexpected argument %q", fs.Arg(0))
	}
	src, ok := cfg.Source(*source)
	if !ok {
		return fmt.Errorf("send: unknown source %q", *source)
	}
	if *data == "" {
		return errors.New("send: --data is required")
	}
	base := *url
	if base == "" {
		base = "http://" + cfg.Receiver.Listen
	}
	params := &provider.SignParams{
		Provider: src.Provider, EventID: *id, EventType: *typ,
		Time: time.Now(), Body: []byte(*data), Config: src.ProviderConfig(),
	}
	if len(src.Secrets) > 0 { // marqeta's HMAC is optional
		params.Secret = src.Secrets[0]
	}
	resp, err := provider.Deliver(ctx, nil, strings.TrimSuffix(base, "/")+"/webhooks/"+src.Name, params)
	if err != nil {
		return sendError(src, err)
	}
	fmt.Printf("%d %s\n", resp.StatusCode, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("send: receiver answered %d", resp.StatusCode)
	}
	return nil
}

// sendError names the flags a provider that sends the event id or type in
// a header needs, when signing refused for want of them.
func sendError(src *config.SourceConfig, err error) error {
	var flags []string
	if errors.Is(err, provider.ErrEventIDRequired) {
		flags = append(flags, "--id")
	}
	if errors.Is(err, provider.ErrEventTypeRequired) {
		flags = append(flags, "--type")
	}
	if flags == nil {
		return fmt.Errorf("send: %w", err)
	}
	return fmt.Errorf("send: source %q needs %s: nothing sent (%w)", src.Name, strings.Join(flags, " and "), err)
}
