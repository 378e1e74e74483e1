package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/internal/webhook"
	"github.com/hookinbox/hookinbox/pkg/config"
)

// sendArgs are send's flags.
type sendArgs struct {
	source, id, typ, data, url string
}

// newSendFlags is send's flag set: send parses it, and the cobra command
// adds it to its own so that --help lists every flag.
func newSendFlags() (*flag.FlagSet, *sendArgs) {
	var a sendArgs
	fs := flag.NewFlagSet("send", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // the error says what is wrong; --help prints the usage
	fs.StringVar(&a.source, "source", "", "source name (required)")
	fs.StringVar(&a.id, "id", "", "event id, for providers that send it in a header")
	fs.StringVar(&a.typ, "type", "", "event type, for providers that send it in a header")
	fs.StringVar(&a.data, "data", "", "raw body (required): JSON, or form parameters for twilio")
	fs.StringVar(&a.url, "url", "", "receiver base URL (default: http://<receiver.listen>)")
	return fs, &a
}

// send signs one delivery as the source's provider would, with the source's
// first secret and credentials, POSTs it to the receiver, and writes the
// answer to stdout. A command line it cannot run is a *usageError.
func send(ctx context.Context, cfg *config.Config, args []string, stdout io.Writer) error {
	fs, a := newSendFlags()
	if err := fs.Parse(args); err != nil {
		return &usageError{fmt.Errorf("send: %w", err)}
	}
	if fs.NArg() > 0 {
		return &usageError{fmt.Errorf("send: unexpected argument %q", fs.Arg(0))}
	}
	if a.source == "" {
		return &usageError{errors.New("send: --source is required")}
	}
	src, ok := cfg.Source(a.source)
	if !ok {
		return &usageError{fmt.Errorf("send: unknown source %q", a.source)}
	}
	if a.data == "" {
		return &usageError{errors.New("send: --data is required")}
	}
	base := a.url
	if base == "" {
		base = "http://" + cfg.Receiver.Listen
	}
	params := &webhook.Params{
		Provider: src.Provider, EventID: a.id, EventType: a.typ,
		Time: time.Now(), Body: []byte(a.data), Config: src.ProviderConfig(),
	}
	if len(src.Secrets) > 0 { // marqeta's HMAC is optional
		params.Secret = src.Secrets[0].Reveal()
	}
	resp, err := webhook.Deliver(ctx, nil, strings.TrimSuffix(base, "/")+"/webhooks/"+src.Name, params)
	if err != nil {
		return sendError(src, err)
	}
	fmt.Fprintf(stdout, "%d %s\n", resp.StatusCode, resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("send: receiver answered %d", resp.StatusCode)
	}
	return nil
}

// sendError names the flags a provider that sends the event id or type in
// a header needs, when signing refused for want of them.
func sendError(src *config.SourceConfig, err error) error {
	var flags []string
	if errors.Is(err, webhook.ErrEventIDRequired) {
		flags = append(flags, "--id")
	}
	if errors.Is(err, webhook.ErrEventTypeRequired) {
		flags = append(flags, "--type")
	}
	if flags == nil {
		return fmt.Errorf("send: %w", err)
	}
	return &usageError{fmt.Errorf("send: source %q needs %s: nothing sent (%w)", src.Name, strings.Join(flags, " and "), err)}
}
