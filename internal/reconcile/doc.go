// Package reconcile asks a provider's API what it sent and makes sure the
// inbox has it, because webhook delivery is not guaranteed (Stripe and
// Shopify both tell their users to reconcile; GitHub never retries a failed
// delivery at all).
//
// Two shapes, by what the provider offers:
//
//   - Providers with an events API (Stripe GET /v1/events, Paddle GET
//     /events, Square SearchEvents) implement Fetcher: it lists the events
//     since a time, page by page, as inboxstore.IncomingEvent keyed exactly
//     like the provider's webhook deliveries (the same verifier's ParseEvent:
//     id, type and twin key). Run claims each page through the receiver's
//     claim (inboxstore.Ingester), so that an event both delivered and
//     listed is stored and processed once. The row's body is the event as
//     listed; its headers say X-Hookinbox-Reconciled: <provider>-api.
//   - GitHub has no events API but redelivers on request: GitHub lists the
//     hook's deliveries and asks for the ones the inbox lacks to be sent
//     again. They come back through the receiver, signed and verified;
//     reconciliation itself stores nothing.
//
// Every call retries 5xx with backoff (RetryConfig), then gives the run
// up. A rate limit (429, GitHub's 403) is waited out until the time the
// provider names (Retry-After, X-RateLimit-Reset); one further than a
// minute, or past the retries, ends the run with a RateLimitedError, and
// the worker snoozes the job until then. The worker runs one periodic River job per source
// (Args, NewWorker); each run lists from the source's watermark (the start
// of its last run that finished, in hookinbox_reconcile_watermark) less its
// lookback, so a worker that was down for hours still catches up, and only
// a finished run moves the watermark, never back.
//
// Worker.RunSource is that run, which inboxctl reconcile calls too, for a
// window of the operator's (since, until) or as a dry run that changes
// nothing (DryRun, and GitHub asked for no redelivery). A run that writes
// holds the source's advisory lock (pg_try_advisory_xact_lock) while it
// lasts, so the job and a manual run never run one source at once
// (ErrRunning: the job is snoozed).
package reconcile
