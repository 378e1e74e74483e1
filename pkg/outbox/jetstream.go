package outbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/hookinbox/hookinbox/internal/jetstream"
)

// JetStreamConfig configures a NATS JetStream destination.
type JetStreamConfig struct {
	// Publisher configures the connection and the stream (URL, Stream,
	// Subjects, CreateStream, AckTimeout; see jetstream.Config).
	Publisher jetstream.Config
	// Subject is the subject template: {source} and {type} stand for the
	// message's source and event type ("stripe.{type}"; see
	// jetstream.RenderSubject). Required.
	Subject string
}

// JetStream is a destination that publishes each message to a NATS
// JetStream stream, on the subject its template renders from the message's
// source and event type, with Nats-Msg-Id set to the message's key, and
// waits for the stream's ack: a re-send within the stream's duplicate
// window is acknowledged and not stored again. A message whose subject or
// headers cannot be published (a message with no source or type for a
// template that needs them, a Nats- header) fails at once; anything else
// (no ack, the server down) is retried.
type JetStream struct {
	pub     *jetstream.Publisher
	subject string
}

// NewJetStream checks the template, connects, and prepares the stream as
// config.Publisher asks.
func NewJetStream(ctx context.Context, config *JetStreamConfig) (*JetStream, error) {
	if err := jetstream.CheckTemplate(config.Subject); err != nil {
		return nil, fmt.Errorf("outbox: nats destination subject: %w", err)
	}
	pub, err := jetstream.New(ctx, config.Publisher)
	if err != nil {
		return nil, fmt.Errorf("outbox: nats destination: %w", err)
	}
	return &JetStream{pub: pub, subject: config.Subject}, nil
}

// Deliver implements Destination.
func (j *JetStream) Deliver(ctx context.Context, r *Record) error {
	subject, err := jetstream.RenderSubject(j.subject, r.Source, r.EventType)
	if err != nil {
		return &PermanentError{Err: err}
	}
	err = j.pub.Publish(ctx, subject, r.Key, r.Payload, r.Headers)
	if errors.Is(err, jetstream.ErrInvalidSubject) || errors.Is(err, jetstream.ErrInvalidHeader) {
		return &PermanentError{Err: err}
	}
	return err
}

// Close closes the connection; the relay calls it when it stops.
func (j *JetStream) Close() { j.pub.Close() }

var _ Destination = (*JetStream)(nil)
