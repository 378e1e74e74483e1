package jetstream

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// DestinationConfig configures the outbox's NATS JetStream destination.
type DestinationConfig struct {
	// Publisher configures the connection and the stream (URL, Stream,
	// Subjects, CreateStream, AckTimeout; see Config).
	Publisher Config
	// Subject is the subject template: {source} and {type} stand for the
	// message's source and event type ("stripe.{type}"; see RenderSubject).
	// Required.
	Subject string
}

// Destination is the outbox destination that publishes each message to a NATS
// JetStream stream, on the subject its template renders from the message's
// source and event type, with Nats-Msg-Id set to the message's key, and
// waits for the stream's ack: a re-send within the stream's duplicate
// window is acknowledged and not stored again. A message whose subject or
// headers cannot be published (a message with no source or type for a
// template that needs them, a Nats- header) fails at once; anything else
// (no ack, the server down) is retried.
type Destination struct {
	pub     *Publisher
	subject string
}

// NewDestination checks the template, connects, and prepares the stream as
// config.Publisher asks.
func NewDestination(ctx context.Context, config *DestinationConfig) (*Destination, error) {
	if err := CheckTemplate(config.Subject); err != nil {
		return nil, fmt.Errorf("outbox: nats destination subject: %w", err)
	}
	pub, err := New(ctx, config.Publisher)
	if err != nil {
		return nil, fmt.Errorf("outbox: nats destination: %w", err)
	}
	return &Destination{pub: pub, subject: config.Subject}, nil
}

// Deliver implements outbox.Destination.
func (j *Destination) Deliver(ctx context.Context, r *outbox.Record) error {
	subject, err := RenderSubject(j.subject, r.Source, r.EventType)
	if err != nil {
		return &outbox.PermanentError{Err: err}
	}
	err = j.pub.Publish(ctx, subject, r.Key, r.Payload, r.Headers)
	if errors.Is(err, ErrInvalidSubject) || errors.Is(err, ErrInvalidHeader) {
		return &outbox.PermanentError{Err: err}
	}
	return err
}

// Close closes the connection; the relay calls it when it stops.
func (j *Destination) Close() { j.pub.Close() }

var _ outbox.Destination = (*Destination)(nil)
