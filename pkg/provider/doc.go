// Package provider authenticates webhook deliveries and splits them into
// events. Each provider's delivery contract (signature scheme, dedup key,
// event type) lives in a file of its own; a Verifier never touches the
// database or the HTTP framework: it takes the raw body bytes and headers.
//
// # Contract every Verifier keeps
//
// Every configured credential is checked before anything in the body is
// used, whatever the Content-Type, which is not signed and never consulted.
// Where a source has several checks (Marqeta's and Adyen's Basic Auth with a
// signature, an hmac source's API key), every one of them must pass.
//
// Most schemes sign the raw request bytes, and their signature is checked
// before the body is parsed at all. Two schemes sign something that can only
// be found by reading the body, which is then parsed first and trusted only
// once every signature matched:
//
//   - Adyen signs fields inside each notification item, so the body is
//     parsed to find the items and their hmacSignature (after Basic Auth is
//     checked); one item that does not match refuses the whole delivery.
//   - Twilio's form scheme signs the decoded POST parameters, not the bytes,
//     so the body is parsed as a form to rebuild the signed string. Its JSON
//     scheme signs the body's SHA-256 and is tried first.
//
// Such parsing is bounded (1000 items; net/url stops at 10000 form
// parameters) and must neither panic nor allocate without bound on any
// input. A Verify error means "not authentic"
// and wraps exactly one sentinel:
//
//   - ErrSignatureMissing: the signature, or the timestamp of a scheme that
//     has one, or a required credential (Basic Auth, an API key) is absent
//     or empty.
//   - ErrSignatureInvalid: the signature or its timestamp is malformed, uses
//     only a scheme version that is ignored (Stripe v0, Standard Webhooks
//     v1a or v2), or matches none of the configured secrets; a credential
//     does not match; or a body that carries its signatures cannot be read.
//   - ErrTimestampOutsideTolerance: the signature is genuine but its signed
//     timestamp is further than Config.Tolerance from Config.Now, in either
//     direction. The signature is checked first, so this error never tells an
//     unauthenticated caller anything about the clock.
//
// Error messages never contain a secret. Comparisons run in constant time
// (hmac.Equal), and a signature is accepted only in its canonical spelling
// (lowercase hex, padded standard base64), so that one signature has one
// accepted form. Every configured secret is tried, so a secret can be
// rotated by configuring the old and the new one side by side.
//
// Delivery.Headers keeps every header the signature needs and no
// credential, so that Reverify can verify a stored delivery again from its
// raw body and those headers alone, and name the secret that signed it;
// the conformance suite checks this for every provider.
//
// An authentic delivery is never an error, even when its body cannot be
// stored: a body that is not a JSON object, is not UTF-8, has a string that
// PostgreSQL's jsonb refuses (\u0000, a lone UTF-16 surrogate) or carries no
// event id yields an Event whose ParseError says why, whose Payload is nil
// and whose ID is kept when the id did not come from the body. An id or type
// that PostgreSQL cannot store or index (not UTF-8, a NUL, over 1024 bytes)
// counts as none. The inbox records such an event as failed instead of
// dropping it or answering with an error that makes the provider retry
// forever. A batch (Marqeta, Adyen) yields one Event per item by the same
// rules; an item without a usable key is keyed by the SHA-256 of its bytes.
//
// # Adding a provider
//
// Write one file named after the provider (github.go) holding an unexported
// verifier type with a constructor newXVerifier(*Config) (*xVerifier, error)
// whose errors name the config key at fault ("square: url is required",
// "secrets: at least one is required"); a provider that outgrows about 300
// lines splits one concern into a second file (hmac_config.go,
// twilio_params.go). Users reach it through New only. From the file's init,
// register it:
//
//	func init() {
//		register("github", adapt(newGitHubVerifier), Preset{MaxBodyBytes: githubMaxBodyBytes})
//	}
//
// What the provider sends is produced outside this package, for inboxctl
// send, the demo and tests: a function in internal/sign computes its
// signature (sign.GitHub), and internal/webhook adds its header signer,
// which refuses to sign without the event id or type a provider sends in a
// header (requireHeaderKeys), and, for a provider that signs inside the
// body (Adyen), its body signer; the conformance suite checks both. A piece
// of a scheme that verifying recomputes (Adyen's signed string, Twilio's
// parameter orders) lives in internal/sign once, and the verifier uses it.
//
// Build Verify from the shared pieces rather than anew: a keyring of the
// secrets (newKeyring, keyring.matches), decodeHexMAC or decodeBase64MAC for
// the signature, requiredHeader, signedTimestamp and checkTimestamp for the
// headers around it, and checkBasicAuth for Basic Auth. Check every
// credential before trusting anything in the body, build events with
// parsePayload and payload.event (for a batch, one Event per item, keyed
// with itemID), and answer handshakes with Delivery.Reply.
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
// The signer type in signers_test.go documents each field; its signatures come
// from the provider's SDK or the test's own HMAC, never from internal/sign. A
// provider that is registered without a signer fails TestConformance. Add the
// name to TestNew, the official test vectors (with their source named), a Fuzz
// target for Verify and for any body splitter, an end-to-end test in
// internal/receiver, and the provider's config keys to config/hookinbox.yaml
// and the README.
package provider
