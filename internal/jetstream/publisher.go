package jetstream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config's fields.
const (
	// AckTimeoutDefault is how long Publish waits for the stream's ack.
	AckTimeoutDefault = 5 * time.Second
	// DuplicatesDefault is the duplicate window of a stream New creates,
	// JetStream's own default.
	DuplicatesDefault = 2 * time.Minute
)

var (
	// ErrNoStream is wrapped by Publish's error when no stream captures the
	// subject (no JetStream responder answered).
	ErrNoStream = errors.New("no stream captures the subject")
	// ErrInvalidHeader is wrapped by Publish's error when a header cannot
	// be sent, or names a reserved Nats- header.
	ErrInvalidHeader = errors.New("invalid header")
)

// Config configures a Publisher.
type Config struct {
	// URL is the NATS server's URL, or several separated by commas, such as
	// "nats://127.0.0.1:4222". Required.
	URL string
	// Name names the connection in the server's monitoring. Default
	// "hookinbox".
	Name string
	// Stream is the stream the subjects belong to. When set, Publish
	// expects each ack to come from this stream (a subject captured by
	// another stream is an error), and New checks that it exists, or
	// creates it with CreateStream. Required with CreateStream.
	Stream string
	// Subjects are the stream's subjects, wildcards allowed
	// ("stripe.>"), for CreateStream. Required with CreateStream.
	Subjects []string
	// AckTimeout is how long Publish waits for the stream's ack when its
	// context has no earlier deadline. Default AckTimeoutDefault.
	AckTimeout time.Duration
	// Duplicates is the duplicate window CreateStream gives the stream:
	// within it, a second message with the same id is acknowledged as a
	// duplicate and not stored. Default DuplicatesDefault.
	Duplicates time.Duration
	// CreateStream makes New create Stream, file-backed, over Subjects with
	// the duplicate window Duplicates, or, when it exists, add the
	// Subjects it lacks and set its duplicate window; its other settings
	// are left as they are.
	CreateStream bool
}

// withDefaults returns a copy of c with the defaults applied.
func (c Config) withDefaults() Config {
	c.Name = cmp.Or(c.Name, "hookinbox")
	c.AckTimeout = cmp.Or(c.AckTimeout, AckTimeoutDefault)
	c.Duplicates = cmp.Or(c.Duplicates, DuplicatesDefault)
	return c
}

// validate names the first field that is wrong.
func (c Config) validate() error {
	switch {
	case c.URL == "":
		return errors.New("jetstream: URL is required")
	case c.AckTimeout < 0:
		return errors.New("jetstream: AckTimeout must not be negative")
	case c.Duplicates < 0:
		return errors.New("jetstream: Duplicates must not be negative")
	case c.CreateStream && c.Stream == "":
		return errors.New("jetstream: Stream is required with CreateStream")
	case c.CreateStream && len(c.Subjects) == 0:
		return errors.New("jetstream: Subjects is required with CreateStream")
	}
	return nil
}

// Publisher publishes messages to JetStream over one connection. It is safe
// for concurrent use.
type Publisher struct {
	cfg Config
	nc  *nats.Conn
	js  natsjs.JetStream
}

// New connects to cfg.URL and, with cfg.CreateStream, creates or updates
// cfg.Stream; with cfg.Stream alone, it checks that the stream exists. The
// connection reconnects on its own after it is lost; a server that cannot
// be reached at all fails New.
func New(ctx context.Context, cfg Config) (*Publisher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nc, err := nats.Connect(cfg.URL, nats.Name(cfg.Name), nats.MaxReconnects(-1))
	if err != nil {
		return nil, fmt.Errorf("jetstream: connect: %w", err)
	}
	js, err := natsjs.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	p := &Publisher{cfg: cfg, nc: nc, js: js}
	if err := p.prepareStream(ctx, false); err != nil {
		nc.Close()
		return nil, err
	}
	return p, nil
}

// prepareStream creates or updates the stream, or checks that it exists,
// as the Config asks; retried says it lost a race to create it once.
func (p *Publisher) prepareStream(ctx context.Context, retried bool) error {
	if p.cfg.Stream == "" {
		return nil
	}
	s, err := p.js.Stream(ctx, p.cfg.Stream)
	switch {
	case errors.Is(err, natsjs.ErrStreamNotFound) && p.cfg.CreateStream:
		_, err = p.js.CreateStream(ctx, natsjs.StreamConfig{
			Name:       p.cfg.Stream,
			Subjects:   p.cfg.Subjects,
			Storage:    natsjs.FileStorage,
			Duplicates: p.cfg.Duplicates,
		})
		if errors.Is(err, natsjs.ErrStreamNameAlreadyInUse) && !retried {
			// Another publisher created it first, with other settings:
			// update it as one that existed.
			return p.prepareStream(ctx, true)
		}
		if err != nil {
			return fmt.Errorf("jetstream: create stream %q: %w", p.cfg.Stream, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("jetstream: stream %q: %w", p.cfg.Stream, err)
	case !p.cfg.CreateStream:
		return nil
	}
	sc := s.CachedInfo().Config
	missing := false
	for _, subject := range p.cfg.Subjects {
		if !slices.Contains(sc.Subjects, subject) {
			sc.Subjects = append(sc.Subjects, subject)
			missing = true
		}
	}
	if !missing && sc.Duplicates == p.cfg.Duplicates {
		return nil
	}
	sc.Duplicates = p.cfg.Duplicates
	if _, err := p.js.UpdateStream(ctx, sc); err != nil {
		return fmt.Errorf("jetstream: update stream %q: %w", p.cfg.Stream, err)
	}
	return nil
}

// Ack is the stream's acknowledgement of a published message.
type Ack struct {
	// Stream is the stream that stored the message.
	Stream string
	// Sequence is the message's sequence in the stream; for a duplicate,
	// the sequence of the copy stored first.
	Sequence uint64
	// Duplicate reports that the stream already held a message with this
	// id within its duplicate window, and did not store this one.
	Duplicate bool
}

// Publish publishes data to subject with the message id msgID (the
// Nats-Msg-Id header) and headers, and waits for the stream's ack; see
// PublishAck. A duplicate is a success.
func (p *Publisher) Publish(ctx context.Context, subject, msgID string, data []byte, headers map[string]string) error {
	_, err := p.PublishAck(ctx, subject, msgID, data, headers)
	return err
}

// PublishAck publishes data to subject with the message id msgID (the
// Nats-Msg-Id header) and headers, and waits for the stream's ack, at most
// Config.AckTimeout or until ctx ends. It returns the ack, which says
// whether the stream already held a message with this id.
//
// An error means the message may or may not have been stored (an ack lost
// to a timeout): publish it again with the same id, and the stream's
// duplicate window drops the second copy. The error wraps ErrNoStream when
// no stream captures subject, ErrInvalidSubject or ErrInvalidHeader when
// the message cannot be sent as given, and the context's error on timeout
// or cancellation. Header names starting with "Nats-" are reserved for
// JetStream's control headers and refused; msgID must not be empty.
func (p *Publisher) PublishAck(ctx context.Context, subject, msgID string, data []byte, headers map[string]string) (*Ack, error) {
	if err := ValidateSubject(subject); err != nil {
		return nil, err
	}
	if msgID == "" || strings.ContainsAny(msgID, "\r\n") {
		return nil, fmt.Errorf("%w: message id %q", ErrInvalidHeader, msgID)
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: nats.Header{}}
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		if err := validateHeader(name, headers[name]); err != nil {
			return nil, err
		}
		msg.Header.Set(name, headers[name])
	}
	opts := []natsjs.PublishOpt{natsjs.WithMsgID(msgID)}
	if p.cfg.Stream != "" {
		opts = append(opts, natsjs.WithExpectStream(p.cfg.Stream))
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.AckTimeout)
	defer cancel()
	ack, err := p.js.PublishMsg(ctx, msg, opts...)
	switch {
	case errors.Is(err, natsjs.ErrNoStreamResponse):
		return nil, fmt.Errorf("jetstream: publish %q: %w: %w", subject, ErrNoStream, err)
	case errors.Is(err, context.DeadlineExceeded):
		return nil, fmt.Errorf("jetstream: publish %q: no ack within %s or the context's deadline: %w",
			subject, p.cfg.AckTimeout, err)
	case err != nil:
		return nil, fmt.Errorf("jetstream: publish %q: %w", subject, err)
	}
	return &Ack{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
}

// validateHeader refuses a header that NATS cannot carry or that would
// steer JetStream.
func validateHeader(name, value string) error {
	if name == "" || strings.ContainsFunc(name, func(r rune) bool {
		return r == ':' || r <= ' ' || r >= 0x7f
	}) {
		return fmt.Errorf("%w: name %q", ErrInvalidHeader, name)
	}
	if strings.HasPrefix(strings.ToLower(name), "nats-") {
		return fmt.Errorf("%w: %q: Nats- headers are reserved for JetStream", ErrInvalidHeader, name)
	}
	if strings.ContainsAny(value, "\r\n") {
		return fmt.Errorf("%w: value of %q holds a line break", ErrInvalidHeader, name)
	}
	return nil
}

// Close closes the connection. Publish fails after Close.
func (p *Publisher) Close() {
	p.nc.Close()
}
