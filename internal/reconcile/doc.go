// Package reconcile asks a provider's API for its recent events and claims
// the ones the inbox is missing, through the same claim as the receiver
// (inbox.Ingester), so that an event both delivered and listed is stored
// and processed once. Stripe and Shopify both tell their users to
// reconcile, because webhook delivery is not guaranteed.
//
// A Fetcher lists one provider's events since a time, page by page, as
// inbox.IncomingEvent keyed exactly like the provider's webhook deliveries
// (the same id, type and twin key), which is what makes the claim
// deduplicate them. Stripe (GET /v1/events with created[gte]) is
// implemented; a provider that lists objects rather than events (Shopify's
// orders by updated_at_min) implements Fetcher by turning each object into
// the event its webhook would have carried, keyed like it (see
// docs/operations.md).
//
// Run reconciles one source once; the worker runs it as a periodic River
// job per source (Args, NewWorker).
package reconcile
