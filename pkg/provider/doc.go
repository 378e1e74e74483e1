// Package provider authenticates webhook deliveries and splits them into
// events. Each provider's delivery contract (signature scheme, dedup key,
// event type) lives in a file of its own; a Verifier never touches the
// database or the HTTP framework: it takes the raw body bytes and headers.
//
// # Contract every Verifier keeps
//
// The signature is checked over the raw request bytes, before anything is
// parsed, whatever the Content-Type. A Verify error means "not authentic"
// and wraps exactly one sentinel:
//
//   - ErrSignatureMissing: the signature header, or the timestamp header of
//     a scheme that has one, is absent or empty.
//   - ErrSignatureInvalid: the signature or its timestamp is malformed, uses
//     only a scheme version that is ignored (Stripe v0, Standard Webhooks
//     v1a or v2), or matches none of the configured secrets.
//   - ErrTimestampOutsideTolerance: the signature is genuine but its signed
//     timestamp is further than Config.Tolerance from Config.Now, in either
//     direction. The signature is checked first, so this error never tells an
//     unauthenticated caller anything about the clock.
//
// Error messages never contain a secret. Comparisons run in constant time
// (hmac.Equal). Every configured secret is tried, so a secret can be rotated
// by configuring the old and the new one side by side.
//
// An authentic delivery is never an error, even when its body cannot be
// stored: a body that is not a JSON object, is not UTF-8, has a string that
// PostgreSQL's jsonb refuses (\u0000, a lone UTF-16 surrogate) or carries no
// event id yields an Event whose ParseError says why, whose Payload is nil
// and whose ID is kept when the id did not come from the body. The receiver
// records such an event as failed instead of dropping it or answering with
// an error that makes the provider retry forever.
//
// # Adding a provider
//
// Write one file named after the provider holding a type with a constructor
// NewX(*Config) (*X, error), register it from the file's init, build events
// with parsePayload, and add a signer for it in signers_test.go: the
// conformance suite then runs every case against it.
package provider
