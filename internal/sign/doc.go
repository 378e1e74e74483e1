// Package sign computes what webhook providers sign, and the signatures they
// send: one function per provider (Stripe, GitHub, Twilio, AdyenBody, …),
// each a pure function of the secret, the time and the body. It serves
// inboxctl send, the demo, load generators and tests, and the outbox, which
// signs its own deliveries as Standard Webhooks does.
//
// pkg/provider's verifiers share the pieces of a scheme that verifying
// recomputes (Adyen's signed string, Twilio's parameter orders and URL, an
// hmac source's template), so that a scheme is written down once. This
// package therefore imports nothing of hookinbox; internal/webhook builds whole
// signed deliveries from a source's provider.Config on top of it.
package sign
