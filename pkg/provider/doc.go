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
// Write one file named after the provider (github.go) holding a type with a
// constructor NewX(*Config) (*X, error) whose errors name the config key at
// fault ("square: url is required"), and an exported SignX helper that
// produces what the provider sends. From the file's init, register both:
//
//	func init() {
//		register("github", adapt(NewGitHub), Preset{MaxBodyBytes: GitHubMaxBodyBytes})
//		registerSigner("github", func(p *SignParams) (http.Header, error) { … })
//	}
//
// Verify checks every configured credential before it trusts anything in
// the body, builds events with parsePayload (for a batch, one Event per item
// by the same rules) and answers handshakes with Delivery.Reply.
//
// Then, in the provider's _test.go, describe how the provider delivers and
// register it with the conformance suite, which runs every case (rotation,
// tampering, every bit flip of the signature, missing credentials, stale and
// future timestamps, wrong prefixes, empty, huge and non-UTF-8 bodies,
// duplicates inside a batch, unstorable JSON) against it:
//
//	func init() { registerConformance(githubSigner) }
//
//	func githubSigner() signer { return signer{provider: "github", …} }
//
// The signer type in signers_test.go documents each field; a provider that
// is registered without a signer fails TestConformance. Add the official
// test vectors (with their source named), a Fuzz target, and an end-to-end
// test in pkg/receiver.
package provider
