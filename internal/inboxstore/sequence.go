package inboxstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// ErrNoSequencePosition is returned when an event's row has no sequence key
// or no order where the route's locators point.
var ErrNoSequencePosition = errors.New("inbox: no sequence position")

// SequenceQuery locates events' sequence keys and orders in their rows, for
// per-object sequencing. Locators are dotted JSON paths into the payload
// ("data.object.customer") or "header:Name", several joined by "|" (the
// first that is set wins): pkg/effect's grammar, less what SQL cannot
// evaluate ("*", "type_prefix", literals).
type SequenceQuery struct {
	// Key locates the sequence key.
	Key string
	// Order locates the order within a key: an integer, or an RFC 3339
	// time (compared in Unix microseconds).
	Order string
	// PoisonAfter: a pending event with this many attempts or more no longer
	// holds back the events after it. 0: it holds them until it is done or
	// failed for good.
	PoisonAfter int
}

// SequencePosition is an event's place in its sequence.
type SequencePosition struct {
	// Source is the event's source.
	Source string
	// Key is the event's sequence key.
	Key string
	// Order is the event's order, as a decimal number.
	Order string
	// ReceivedAt and ID break ties in Order.
	ReceivedAt time.Time
	ID         int64
	// Ahead counts the pending events of the key that come before this one
	// and still hold it back; 1 when a parked one was found without
	// counting (see CountSequenceAhead). Only CountSequenceAhead sets it.
	Ahead int
}

// CheckSequenceLocator reports whether loc can be evaluated in SQL.
func CheckSequenceLocator(loc string) error {
	_, _, err := sequenceExpr(loc, "i", 1)
	return err
}

// sequenceExpr turns a locator into a SQL text expression over the row
// alias, whose values start at placeholder $first. The query must join the
// row's delivery as alias_d (deliveryJoin).
func sequenceExpr(loc, alias string, first int) (string, []any, error) {
	var (
		parts []string
		args  []any
	)
	for alt := range strings.SplitSeq(loc, "|") {
		alt = strings.TrimSpace(alt)
		n := first + len(args)
		switch {
		case alt == "":
			return "", nil, fmt.Errorf("inbox: empty locator in %q", loc)
		case strings.HasPrefix(alt, "header:"):
			name := strings.TrimSpace(alt[len("header:"):])
			if name == "" {
				return "", nil, fmt.Errorf("inbox: %q names no header", alt)
			}
			parts = append(parts, fmt.Sprintf("(coalesce(%[1]s_d.headers, %[1]s.legacy_headers) ->> $%[2]d::text)", alias, n))
			args = append(args, http.CanonicalHeaderKey(name))
		case strings.ContainsAny(alt, "*=") || alt == "type_prefix":
			return "", nil, fmt.Errorf(`inbox: %q: a sequence locator is a JSON path or "header:Name"`, alt)
		default:
			path := strings.Split(alt, ".")
			for _, step := range path {
				if step == "" {
					return "", nil, fmt.Errorf("inbox: %q has an empty path step", alt)
				}
			}
			parts = append(parts, fmt.Sprintf("(coalesce(%[1]s_d.payload, %[1]s.legacy_payload) #>> $%[2]d::text[])", alias, n))
			args = append(args, path)
		}
	}
	if len(parts) == 1 {
		return parts[0], args, nil
	}
	return "coalesce(" + strings.Join(parts, ", ") + ")", args, nil
}

// deliveryJoin joins the delivery of webhook_inbox AS alias, as alias_d.
func deliveryJoin(alias string) string {
	return fmt.Sprintf("LEFT JOIN webhook_inbox_delivery AS %[1]s_d ON %[1]s_d.inbox_id = %[1]s.id", alias)
}

// exprs returns q's key and order expressions over the row alias, their
// placeholders numbered from first, and their values.
func (q *SequenceQuery) exprs(alias string, first int) (key, order string, args []any, err error) {
	key, args, err = sequenceExpr(q.Key, alias, first)
	if err != nil {
		return "", "", nil, err
	}
	order, orderArgs, err := sequenceExpr(q.Order, alias, first+len(args))
	if err != nil {
		return "", "", nil, err
	}
	return key, "hookinbox_sequence_order(" + order + ")", append(args, orderArgs...), nil
}

// LocateSequence reads the sequence key and order of the row id, in tx,
// without counting anything: the key is what a worker locks before it
// counts (CountSequenceAhead). It returns ErrNotFound when the row is done,
// erased or gone (nothing to run, as Take), and
// ErrNoSequencePosition when the row has no key or no usable order.
func (s *Store) LocateSequence(ctx context.Context, tx pgx.Tx, id int64, q *SequenceQuery) (*SequencePosition, error) {
	key, order, args, err := q.exprs("w", 2)
	if err != nil {
		return nil, err
	}
	p := &SequencePosition{ID: id}
	err = tx.QueryRow(ctx, fmt.Sprintf(`
SELECT w.source, coalesce(%s, ''), coalesce(%s::text, ''), w.received_at
FROM webhook_inbox AS w `+deliveryJoin("w")+` WHERE w.id = $1 AND w.status <> 'done' AND w.erased_at IS NULL`, key, order),
		append([]any{planned, id}, args...)...).Scan(&p.Source, &p.Key, &p.Order, &p.ReceivedAt)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("inbox: sequence position: %w", err)
	case p.Key == "":
		return nil, fmt.Errorf("%w: no sequence key at %q", ErrNoSequencePosition, q.Key)
	case p.Order == "":
		return nil, fmt.Errorf("%w: no integer or RFC 3339 order at %q", ErrNoSequencePosition, q.Order)
	}
	return p, nil
}

// CountSequenceAhead sets p.Ahead: how many pending events of p's key come
// before p (by order, then received_at, then id), leaving out those that
// have failed q.PoisonAfter attempts. When a parked event of the key comes
// before p and holds it back, that is known from the park's index alone:
// the pending rows are not counted, and Ahead is 1. It returns ErrNotFound
// when p's row is done, erased or gone by now (it ran meanwhile, while the
// caller waited for the key's lock).
//
// The count reads the source's pending rows; for a large backlog, an
// expression index on the key's path over the pending rows keeps it fast
// (see docs/design.md, "Per-object sequencing"). A worker runs it once per
// run of an event, under its key's lock.
func (s *Store) CountSequenceAhead(ctx context.Context, tx pgx.Tx, p *SequencePosition, q *SequenceQuery) error {
	key, order, args, err := q.exprs("i", 7)
	if err != nil {
		return err
	}
	err = tx.QueryRow(ctx, fmt.Sprintf(`
SELECT CASE WHEN NOT EXISTS (
    SELECT 1 FROM webhook_inbox AS w WHERE w.id = $2 AND w.status <> 'done' AND w.erased_at IS NULL
) THEN -1 WHEN EXISTS (
    SELECT 1 FROM hookinbox_sequence_park AS k JOIN webhook_inbox AS i ON i.id = k.inbox_id
    WHERE k.source = $1 AND k.seq_key = $3 AND (k.ord, k.received_at, k.inbox_id) < ($4::numeric, $5, $2)
      AND i.status = 'pending' AND i.erased_at IS NULL AND ($6::int = 0 OR i.attempts < $6::int)
) THEN 1 ELSE (
    SELECT count(*) FROM webhook_inbox AS i `+deliveryJoin("i")+`
    WHERE i.source = $1 AND i.status = 'pending' AND i.id <> $2 AND %s = $3
      AND (%s, i.received_at, i.id) < ($4::numeric, $5, $2)
      AND ($6::int = 0 OR i.attempts < $6::int)
) END`, key, order),
		append([]any{planned, p.Source, p.ID, p.Key, p.Order, p.ReceivedAt, q.PoisonAfter}, args...)...).Scan(&p.Ahead)
	if err != nil {
		return fmt.Errorf("inbox: sequence position: %w", err)
	}
	if p.Ahead < 0 {
		return ErrNotFound
	}
	return nil
}

// ParkSequenceTx parks the event at p, in tx: it records that the event
// waits for its key, so that the key's next run wakes it
// (WakeSequenceTx). The caller holds the key's lock, and ends the event's
// job without taking its row: the row stays pending, with no job.
func (s *Store) ParkSequenceTx(ctx context.Context, tx pgx.Tx, p *SequencePosition) error {
	_, err := tx.Exec(ctx, `
INSERT INTO hookinbox_sequence_park (inbox_id, source, seq_key, ord, received_at) VALUES ($1, $2, $3, $4::numeric, $5)
ON CONFLICT (inbox_id) DO UPDATE SET parked_at = now()`, p.ID, p.Source, p.Key, p.Order, p.ReceivedAt)
	if err != nil {
		return fmt.Errorf("inbox: park event %d: %w", p.ID, err)
	}
	return nil
}

// WakeParams say whose parked event WakeSequenceTx wakes.
type WakeParams struct {
	// Source and Key are the sequence key.
	Source, Key string
	// Self is the event that runs, whose own park, if any, is removed; 0
	// for none.
	Self int64
	// Client inserts the woken event's job.
	Client *river.Client[pgx.Tx]
	// QueueFor names a source's queue.
	QueueFor func(source string) string
}

// WakeSequenceTx wakes the lowest parked event of a key (by order, then
// received_at, then id) whose row is still pending: its park is removed and
// it gets a new job, in tx, which commits both. The caller holds the key's
// lock, so no event of the key parks meanwhile. It returns the woken row,
// nil when none waits.
func (s *Store) WakeSequenceTx(ctx context.Context, tx pgx.Tx, params *WakeParams) (*ClaimedRow, error) {
	rows, err := tx.Query(ctx, `
WITH own AS (
    DELETE FROM hookinbox_sequence_park WHERE inbox_id = $3
), next AS (
    SELECT k.inbox_id FROM hookinbox_sequence_park AS k JOIN webhook_inbox AS i ON i.id = k.inbox_id
    WHERE k.source = $1 AND k.seq_key = $2 AND k.inbox_id <> $3 AND i.status = 'pending' AND i.erased_at IS NULL
    ORDER BY k.ord, k.received_at, k.inbox_id
    LIMIT 1
), woken AS (
    DELETE FROM hookinbox_sequence_park AS k USING next WHERE k.inbox_id = next.inbox_id RETURNING k.inbox_id
)
SELECT i.id, i.source, i.event_id, i.status, i.event_type, coalesce(i.request_id, '')
FROM webhook_inbox AS i JOIN woken ON i.id = woken.inbox_id`, planned, params.Source, params.Key, params.Self)
	if err != nil {
		return nil, fmt.Errorf("inbox: wake sequence: %w", err)
	}
	woken, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ClaimedRow])
	if err != nil {
		return nil, fmt.Errorf("inbox: wake sequence: %w", err)
	}
	if len(woken) == 0 {
		return nil, nil //nolint:nilnil // no parked event is no error: the key's queue is empty
	}
	if err := s.EnqueueTx(ctx, tx, params.Client, woken, params.QueueFor); err != nil {
		return nil, err
	}
	return &woken[0], nil
}

// SequenceKey is a sequence key with parked events.
type SequenceKey struct {
	Source, Key string
}

// ListStalledSequences returns up to limit keys, of sources that are not
// paused, with an event parked more than olderThan ago: the reaper wakes
// them (WakeSequenceTx), in case the event their parked events waited for
// will never wake them (it failed for good, or was purged). First it
// deletes the parks older than olderThan whose row is no longer pending.
//
// The keys whose newest park is oldest come first: a key woken at a pass
// whose event parks again behind a head still pending (between attempts)
// goes to the back, so that more than limit such keys, stalled at every
// pass, never keep out a key that nothing else will wake. The list reads
// every park (about 0.2 s for 40,000 on a busy 2-core machine), once a
// reaper pass.
func (s *Store) ListStalledSequences(ctx context.Context, db DBTX, olderThan time.Duration, limit int) ([]SequenceKey, error) {
	_, err := db.Exec(ctx, `
DELETE FROM hookinbox_sequence_park AS k
WHERE k.parked_at < now() - $1 * interval '1 millisecond'
  AND NOT EXISTS (SELECT 1 FROM webhook_inbox AS i WHERE i.id = k.inbox_id AND i.status = 'pending' AND i.erased_at IS NULL)`,
		planned, olderThan.Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("inbox: stalled sequences: %w", err)
	}
	rows, err := db.Query(ctx, `
SELECT k.source, k.seq_key FROM hookinbox_sequence_park AS k
WHERE NOT EXISTS (SELECT 1 FROM hookinbox_source_pause AS p WHERE p.source = k.source)
GROUP BY k.source, k.seq_key
HAVING min(k.parked_at) < now() - $1 * interval '1 millisecond'
ORDER BY max(k.parked_at)
LIMIT $2`, planned, olderThan.Milliseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("inbox: stalled sequences: %w", err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowToStructByPos[SequenceKey])
	if err != nil {
		return nil, fmt.Errorf("inbox: stalled sequences: %w", err)
	}
	return keys, nil
}
