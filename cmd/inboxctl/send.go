package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/provider"
)

// send signs one delivery as the source's provider would and POSTs it.
func send(ctx context.Context, cfg *config.Config, args []string) error {
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	source := fs.String("source", "", "source name (required)")
	id := fs.String("id", "", "event id (header-keyed providers)")
	typ := fs.String("type", "", "event type (header-keyed providers)")
	data := fs.String("data", "", "raw body (required)")
	url := fs.String("url", "", "receiver base URL (default: http://<receiver.listen>)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	src, ok := cfg.Source(*source)
	if !ok {
		return fmt.Errorf("send: unknown source %q", *source)
	}
	if *data == "" {
		return fmt.Errorf("send: --data is required")
	}
	base := *url
	if base == "" {
		base = "http://" + cfg.Receiver.Listen
	}
	resp, err := provider.Deliver(ctx, nil, base+"/webhooks/"+src.Name, &provider.SignParams{
		Provider: src.Provider, Secret: src.Secrets[0], EventID: *id, EventType: *typ,
		Time: time.Now(), Body: []byte(*data),
	})
	if err != nil {
		return err
	}
	fmt.Printf("%d %s\n", resp.StatusCode, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("send: receiver answered %d", resp.StatusCode)
	}
	return nil
}
