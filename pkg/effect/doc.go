// Package effect makes a handler's business effects safe against the
// disorder and duplication that webhook providers never rule out: events of
// one object arrive out of order (Shopify's can be a day late), two events
// carry one change, and a replayed or purged inbox hands an event in again.
//
// It has two tools, both used with the handler's transaction:
//
//   - Upsert writes an object's snapshot through a version guard,
//     INSERT … ON CONFLICT … DO UPDATE … WHERE current < new, so a stale
//     snapshot never overwrites a newer one, whatever order they are
//     processed in. It reports whether it inserted, updated, or found the
//     snapshot stale. The built-in "mirror" handler (pkg/worker) keeps every
//     object of a route this way, in the hookinbox_snapshot table.
//   - Once records a business effect key ("charge ch_123 applied") in
//     hookinbox_effect_once and reports whether this is its first time. It is
//     the second layer of idempotency, for when the inbox is bypassed,
//     purged or replayed.
//
// # Versions
//
// A snapshot's version is an int64. Use a revision counter when the payload
// has one (Square's data.object.<type>.version), otherwise a timestamp in
// Unix microseconds (Shopify's payload updated_at, else its
// X-Shopify-Triggered-At header; Stripe's created; Paddle's occurred_at). See
// Spec and DefaultSpec for where they come from for each provider.
//
// # The tie rule
//
// Timestamps tie: Stripe's created has one-second resolution. What happens
// when two snapshots of an object have the same version is a Tie:
//
//   - TieArrival (the default) orders snapshots by (version, event time,
//     inbox received_at, inbox id): of two tied versions, the one with the
//     later provider event time wins, and with that tied too, the one the
//     inbox received later (then the larger inbox id). A same-second later
//     delivery is therefore never silently dropped.
//   - TieKeepFirst orders by version alone: of two tied versions, whichever
//     was written first stays, and the other is reported stale.
//
// With either rule, an identical replay of the snapshot already stored (the
// same inbox row processed again) compares equal and is a no-op: Upsert
// reports it stale and writes nothing.
//
// # Inserted, updated or stale
//
// On PostgreSQL 15 to 17 Upsert tells an insert from an update with
// RETURNING (xmax = 0): a freshly inserted row has no deleting transaction.
// That relies on an implementation detail, which PostgreSQL 18 replaces with
// RETURNING old.*/new.*: on 18 and later Upsert uses
// RETURNING (old.object_id IS NULL). The choice is made per connection from
// the server_version_num (or server_version) parameter the server reports at
// connection start, with no extra round trip. No row back means the guard
// refused the write: stale.
//
// # Retention
//
// Snapshots are kept as long as their objects matter to you: hookinbox never
// deletes them (delete rows yourself when an object is gone for good). Effect
// keys are kept until PruneOnce deletes those older than a cut-off of your
// choosing, independent of the inbox's own retention. Keep them at least as
// long as a provider may redeliver or you may replay: Stripe retries for 3
// days, Shopify for 48 hours; a replay from
// an archive needs longer. Pruning a key makes its effect applicable again.
package effect
