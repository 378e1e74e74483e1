package inboxstore

import (
	"errors"
	"fmt"
	"slices"
	"time"
)

// Selection chooses inbox rows for an operator's bulk action: a replay, a
// purge, a count. Every set field narrows it; the zero value selects every
// row. It is stored as JSON with a bulk replay, so its field names are part
// of the hookinbox_replay table.
type Selection struct {
	// Source, when set, selects one source's rows.
	Source string `json:"source,omitempty"`
	// EventType, when set, selects the rows of that exact type.
	EventType string `json:"event_type,omitempty"`
	// Statuses, when set, selects the rows in one of them.
	Statuses []Status `json:"statuses,omitempty"`
	// Since and Until, when set, select rows received at or after Since and
	// before Until.
	Since time.Time `json:"since,omitzero"`
	Until time.Time `json:"until,omitzero"`
	// ErrorContains, when set, selects rows whose last error contains it,
	// ignoring case.
	ErrorContains string `json:"error_contains,omitempty"`
	// EventIDs, when set, selects these events (of Source, when set).
	EventIDs []string `json:"event_ids,omitempty"`
}

// ErrEmptySelection is returned by actions that refuse a Selection that
// narrows nothing, so that a typo cannot erase the whole inbox.
var ErrEmptySelection = errors.New("inbox: the selection selects every row; name a source, a type, a time range, an error or events")

// Validate checks the statuses and the time range.
func (s *Selection) Validate() error {
	for _, st := range s.Statuses {
		if !slices.Contains([]Status{StatusPending, StatusDone, StatusFailed}, st) {
			return fmt.Errorf("inbox: status must be pending, done or failed, not %q", st)
		}
	}
	if !s.Since.IsZero() && !s.Until.IsZero() && !s.Until.After(s.Since) {
		return fmt.Errorf("inbox: the time range is empty (until %s is not after since %s)",
			s.Until.Format(time.RFC3339), s.Since.Format(time.RFC3339))
	}
	return nil
}

// Narrows reports whether s selects less than every row (statuses alone do
// not count: "every failed row" is still the whole inbox's dead letters).
// Purge refuses a selection that does not narrow; a bulk replay of one asks
// the operator first.
func (s *Selection) Narrows() bool {
	return s.Source != "" || s.EventType != "" || !s.Since.IsZero() || !s.Until.IsZero() ||
		s.ErrorContains != "" || len(s.EventIDs) > 0
}

// selectionWhere is the condition of a Selection on webhook_inbox AS i; its
// parameters are args' values, from $1 to $7.
const selectionWhere = `($1 = '' OR i.source = $1) AND ($2 = '' OR i.event_type = $2)
  AND (cardinality($3::text[]) = 0 OR i.status = ANY($3::text[]))
  AND ($4::timestamptz IS NULL OR i.received_at >= $4) AND ($5::timestamptz IS NULL OR i.received_at < $5)
  AND ($6 = '' OR strpos(lower(coalesce(i.last_error, '')), lower($6)) > 0)
  AND (cardinality($7::text[]) = 0 OR i.event_id = ANY($7::text[]))`

// args are the parameters $1 to $7 of selectionWhere.
func (s *Selection) args() []any {
	statuses := make([]string, len(s.Statuses))
	for i, st := range s.Statuses {
		statuses[i] = string(st)
	}
	ids := s.EventIDs
	if ids == nil {
		ids = []string{}
	}
	return []any{s.Source, s.EventType, statuses, nullTime(s.Since), nullTime(s.Until), s.ErrorContains, ids}
}
