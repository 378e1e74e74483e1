package inboxstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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
	// Key is the event's sequence key.
	Key string
	// Order is the event's order, as a decimal number.
	Order string
	// ReceivedAt and ID break ties in Order.
	ReceivedAt time.Time
	ID         int64
	// Ahead counts the pending events of the key that come before this one
	// and still hold it back.
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

// SequencePosition reads the position of the row id in tx: its key, its
// order, and how many pending events of its key come before it (by order,
// then received_at, then id). It returns ErrNoSequencePosition when the row
// has no key or no usable order.
//
// The count reads the source's pending rows; for a large backlog, an
// expression index on the key's path over the pending rows keeps it fast
// (see docs/design.md, "Per-object sequencing").
func (s *Store) SequencePosition(ctx context.Context, tx pgx.Tx, id int64, q *SequenceQuery) (*SequencePosition, error) {
	args := []any{id, q.PoisonAfter}
	meKey, keyArgs, err := sequenceExpr(q.Key, "w", len(args)+1)
	if err != nil {
		return nil, err
	}
	args = append(args, keyArgs...)
	meOrder, orderArgs, err := sequenceExpr(q.Order, "w", len(args)+1)
	if err != nil {
		return nil, err
	}
	args = append(args, orderArgs...)
	// The same expressions over the other rows reuse the placeholders.
	iKey, _, _ := sequenceExpr(q.Key, "i", 3)
	iOrder, _, _ := sequenceExpr(q.Order, "i", 3+len(keyArgs))
	sql := fmt.Sprintf(`
WITH me AS (
    SELECT w.id, w.source, w.received_at, %s AS k, hookinbox_sequence_order(%s) AS o FROM webhook_inbox AS w `+deliveryJoin("w")+` WHERE w.id = $1
)
SELECT coalesce(me.k, ''), coalesce(me.o::text, ''), me.received_at, (
    SELECT count(*) FROM webhook_inbox AS i `+deliveryJoin("i")+`
    WHERE i.source = me.source AND i.status = 'pending' AND i.id <> me.id AND %s = me.k
      AND (hookinbox_sequence_order(%s), i.received_at, i.id) < (me.o, me.received_at, me.id)
      AND ($2::int = 0 OR i.attempts < $2::int)
)
FROM me`, meKey, meOrder, iKey, iOrder)
	p := &SequencePosition{ID: id}
	err = tx.QueryRow(ctx, sql, append([]any{planned}, args...)...).Scan(&p.Key, &p.Order, &p.ReceivedAt, &p.Ahead)
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
