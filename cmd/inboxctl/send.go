package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
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
	header, err := provider.SignHeaders(&provider.SignParams{
		Provider: src.Provider, Secret: src.Secrets[0], EventID: *id, EventType: *typ,
		Time: time.Now(), Body: []byte(*data),
	})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/webhooks/"+src.Name, bytes.NewReader([]byte(*data)))
	if err != nil {
		return err
	}
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("send: receiver answered %d", resp.StatusCode)
	}
	return nil
}
