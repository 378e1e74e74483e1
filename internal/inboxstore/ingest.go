package inboxstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/hookinbox/hookinbox/pkg/inbox"
)

// Ingester claims a delivery's events and enqueues their jobs in one
// transaction.
type Ingester struct {
	pool   *pgxpool.Pool
	store  *Store
	river  *river.Client[pgx.Tx]
	config *IngesterConfig
}

// IngesterConfig configures an Ingester.
type IngesterConfig struct {
	// QueueFor returns the River queue of a source's jobs. Defaults to
	// River's default queue for every source.
	QueueFor func(source string) string
	// Now returns the time stamped on claimed rows. Defaults to the
	// database's clock.
	Now func() time.Time
	// KeepRemoteWrite lets the claim commit at synchronous_commit =
	// remote_write when the session has it (see DurableTxOptions). Set in
	// code from DurabilityConfig.KeepRemoteWrite. Defaults to false: the
	// claim raises remote_write to on.
	KeepRemoteWrite bool
}

// NewIngester returns an Ingester. riverClient may be insert-only (no
// workers); it must use the riverpgxv5 driver on the same database.
func NewIngester(pool *pgxpool.Pool, riverClient *river.Client[pgx.Tx], config *IngesterConfig) *Ingester {
	c := *config
	if c.QueueFor == nil {
		c.QueueFor = func(string) string { return river.QueueDefault }
	}
	if c.Now == nil {
		c.Now = func() time.Time { return time.Time{} }
	}
	return &Ingester{pool: pool, store: New(pool), river: riverClient, config: &c}
}

// IngestResult says what a delivery changed.
type IngestResult struct {
	// Claimed are the rows this delivery inserted, in input order.
	Claimed []ClaimedRow
	// Counts counts the claimed rows (New), the skipped events whose
	// (source, event_id) was taken (Duplicates), and those stopped by their
	// twin key alone (Twins).
	inbox.ClaimCounts
}

// Ingest applies the inbox's key policy to the delivery's events (see
// Delivery), claims them, enqueues a River job for each newly claimed
// pending row, and commits: IngestGroup of a group of one (the single case
// is a slice of one, as River's Insert is its InsertMany's). Only after
// Ingest returns nil may the caller acknowledge the delivery.
func (in *Ingester) Ingest(ctx context.Context, delivery *Delivery) (*IngestResult, error) {
	results, err := in.IngestGroup(ctx, []*Delivery{delivery})
	if err != nil {
		return nil, err
	}
	return results[0], nil
}

// IngestGroup applies the key policy to several deliveries and claims their
// events in one transaction: one claim statement, one bulk enqueue, one
// commit (group commit). It returns each delivery's result; a delivery
// whose event is also in an earlier delivery of the group sees it as a
// duplicate. On error nothing of the group was committed, or, for an error
// during COMMIT, it is unknown whether it was: the caller must not
// acknowledge any of them. See claim for what it does with a conflict or a
// payload PostgreSQL refuses.
func (in *Ingester) IngestGroup(ctx context.Context, group []*Delivery) ([]*IngestResult, error) {
	return in.claim(ctx, deliveryGroup(group), false)
}

// IngestGroupDry says what IngestGroup would do with group, changing
// nothing: it is the same claim (same statement, same key policy, same
// counts), rolled back instead of committed and enqueuing no job, so its
// results' Claimed stay empty (no row was kept). A claim that commits
// meanwhile may take an event it called new.
func (in *Ingester) IngestGroupDry(ctx context.Context, group []*Delivery) ([]*IngestResult, error) {
	return in.claim(ctx, deliveryGroup(group), true)
}

// deliveryGroup is each delivery's events, after the key policy.
func deliveryGroup(group []*Delivery) [][]newEvent {
	events := make([][]newEvent, len(group))
	for i, d := range group {
		events[i] = d.events()
	}
	return events
}

// errDryRun rolls a dry claim's transaction back.
var errDryRun = errors.New("inbox: dry run")

// claim is the one claim, of one delivery's events or of a group's: every
// path that inserts into webhook_inbox (Ingest, IngestGroup, IngestGroupDry,
// the Batcher) comes here, and through claimOnce to the one statement
// (Store.claim).
//
// A conflict (PgConflict: a deadlock, a serialization failure) rolled
// everything back: the transaction runs again (RetryConflicts). Claims
// insert in key order, so only twin keys can still deadlock, and rarely.
//
// A payload that PostgreSQL's jsonb refuses although Go's decoder accepted
// it (an unpaired surrogate escape, say) fails the statement (PgData); claim
// then finds the offending events, records them as failed with the
// database's reason, and claims again, so that one bad event neither loses
// the others nor makes the provider retry forever.
//
// With dry the transaction is rolled back and nothing is enqueued.
func (in *Ingester) claim(ctx context.Context, group [][]newEvent, dry bool) ([]*IngestResult, error) {
	try := func() ([]*IngestResult, error) {
		var results []*IngestResult
		err := RetryConflicts(ctx, ConflictAttemptsDefault, func() error {
			var err error
			results, err = in.claimOnce(ctx, group, dry)
			return err
		}, nil)
		return results, err
	}
	results, err := try()
	if err == nil || ClassifyPg(err) != PgData || !in.quarantine(ctx, group) {
		return results, err
	}
	return try()
}

// claimOnce runs the claim's transaction once.
func (in *Ingester) claimOnce(ctx context.Context, group [][]newEvent, dry bool) ([]*IngestResult, error) {
	var all []newEvent
	if len(group) == 1 {
		all = group[0]
	} else {
		for _, events := range group {
			all = append(all, events...)
		}
	}
	var (
		outcomes []outcome
		claimed  map[[2]string]ClaimedRow
	)
	// The claim commits durably (DurableTxOptions): the caller answers 2xx
	// once it returns.
	err := pgx.BeginTxFunc(ctx, in.pool, DurableTxOptions(in.config.KeepRemoteWrite), func(tx pgx.Tx) error {
		rows, err := in.store.claim(ctx, tx, all, in.config.Now())
		if err != nil {
			return err
		}
		if !dry {
			if err := in.store.enqueueTx(ctx, tx, in.river, rows, in.config.QueueFor, EventPriority, jobMetadata(all)); err != nil {
				return err
			}
		}
		outcomes, claimed, err = in.classify(ctx, tx, all, rows)
		if err == nil && dry {
			return errDryRun
		}
		return err
	})
	if err != nil && (!dry || !errors.Is(err, errDryRun)) {
		return nil, err
	}
	results := make([]*IngestResult, len(group))
	start := 0
	for i, events := range group {
		res := &IngestResult{}
		for j, ev := range events {
			switch outcomes[start+j] {
			case outcomeNew:
				res.New++
				if !dry {
					res.Claimed = append(res.Claimed, claimed[[2]string{ev.Source, ev.EventID}])
				}
			case outcomeDuplicate:
				res.Duplicates++
			case outcomeTwin:
				res.Twins++
			}
		}
		results[i] = res
		start += len(events)
	}
	return results, nil
}

// outcome is what a claim did with one event.
type outcome uint8

const (
	outcomeNew outcome = iota + 1
	outcomeDuplicate
	outcomeTwin
)

// classify tells, for each event, whether the claim inserted it, skipped it
// as a duplicate (its source and event id were taken), or skipped it as a
// twin (only its twin key was taken). Of events with one (source, event id),
// the first in input order is the inserted one, as the claim inserts. It
// costs a query only when something was skipped. A skipped event's conflicting row
// was committed, or inserted by this very statement, before the claim
// returned, so it is visible here.
func (in *Ingester) classify(ctx context.Context, tx pgx.Tx, events []newEvent, rows []ClaimedRow) ([]outcome, map[[2]string]ClaimedRow, error) {
	claimed := make(map[[2]string]ClaimedRow, len(rows))
	for _, row := range rows {
		claimed[[2]string{row.Source, row.EventID}] = row
	}
	outcomes := make([]outcome, len(events))
	var skipped []int
	taken := make(map[[2]string]bool, len(rows))
	for i, ev := range events {
		key := [2]string{ev.Source, ev.EventID}
		if _, ok := claimed[key]; ok && !taken[key] {
			taken[key] = true
			outcomes[i] = outcomeNew
			continue
		}
		skipped = append(skipped, i)
	}
	if len(skipped) == 0 {
		return outcomes, claimed, nil
	}
	sources, ids := make([]string, len(skipped)), make([]string, len(skipped))
	for k, i := range skipped {
		sources[k], ids[k] = events[i].Source, events[i].EventID
	}
	existing, err := in.store.existingEventIDs(ctx, tx, sources, ids)
	if err != nil {
		return nil, nil, err
	}
	for k, i := range skipped {
		outcomes[i] = outcomeTwin
		if existing[[2]string{sources[k], ids[k]}] {
			outcomes[i] = outcomeDuplicate
		}
	}
	return outcomes, claimed, nil
}

// EnqueueTx inserts a River job for every pending row in rows, on the queue
// queueFor names for its source, in the caller's transaction. The job's
// args carry the row's id; the row keeps no link back (see newestJob).
func (s *Store) EnqueueTx(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], rows []ClaimedRow, queueFor func(string) string) error {
	return s.enqueueTx(ctx, tx, client, rows, queueFor, EventPriority, nil)
}

// enqueueTx is EnqueueTx with the jobs' River priority (EventPriority or
// ReplayPriority) and, by (source, event id), their metadata (see
// jobMetadata; nil for none).
func (s *Store) enqueueTx(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], rows []ClaimedRow, queueFor func(string) string,
	priority int, metadata map[[2]string][]byte,
) error {
	params := make([]river.InsertManyParams, 0, len(rows))
	for _, row := range rows {
		if row.Status != StatusPending {
			continue
		}
		params = append(params, river.InsertManyParams{
			Args: JobArgs{InboxID: row.ID, Source: row.Source, EventID: row.EventID, EventType: row.EventType, RequestID: row.RequestID},
			InsertOpts: &river.InsertOpts{
				Queue: queueFor(row.Source), Priority: priority, Metadata: metadata[[2]string{row.Source, row.EventID}],
			},
		})
	}
	if len(params) == 0 {
		return nil
	}
	if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("inbox: enqueue: %w", err)
	}
	return nil
}

// jobMetadata maps each event's (source, event id) to its job's metadata:
// the trace context of the delivery that brought it (see
// Delivery.TraceContext). Of events with one (source, event id), the first
// in input order is the one the claim inserts (see classify), so its
// delivery's is kept. It is nil when no event has metadata (tracing is
// off).
//
// Per delivery, not from ctx: a group transaction commits many deliveries,
// and its context belongs to none of them.
func jobMetadata(events []newEvent) map[[2]string][]byte {
	var out map[[2]string][]byte
	for _, ev := range events {
		if ev.JobMetadata == nil {
			continue
		}
		if out == nil {
			out = make(map[[2]string][]byte, len(events))
		}
		key := [2]string{ev.Source, ev.EventID}
		if _, ok := out[key]; !ok {
			out[key] = ev.JobMetadata
		}
	}
	return out
}

// quarantine marks each event of group whose payload jsonb refuses as
// failed, and reports whether it found any.
func (in *Ingester) quarantine(ctx context.Context, group [][]newEvent) bool {
	found := false
	for _, events := range group {
		for i := range events {
			ev := &events[i]
			if ev.FailReason != "" || ev.Payload == nil {
				continue
			}
			if err := in.store.checkJSONB(ctx, ev.Payload); err != nil {
				ev.FailReason = "payload rejected by PostgreSQL jsonb: " + err.Error()
				ev.Payload = nil
				found = true
			}
		}
	}
	return found
}
