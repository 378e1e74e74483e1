// Package jetstream publishes messages to NATS JetStream and waits for the
// stream to acknowledge each one. It is the outbox relay's "nats"
// destination.
//
// Each message carries a message id in the Nats-Msg-Id header. JetStream
// stores a message once per id within the stream's duplicate window
// (Config.Duplicates), so a relay that publishes a message again, after a
// crash between publishing and marking it delivered or after an ack lost to
// a timeout, does not store a second copy: the stream acknowledges the
// re-send as a duplicate (Ack.Duplicate). Past the window a re-send is
// stored again, which is why consumers still deduplicate by the id.
//
// Publish returns only once the stream has acknowledged the message: a
// subject that no stream captures, a server that does not answer within
// Config.AckTimeout, and a cancelled context are all errors, never a silent
// success.
//
// Subjects are rendered from templates such as "stripe.{type}" by
// RenderSubject, whose rules for unusual characters are documented there.
package jetstream
