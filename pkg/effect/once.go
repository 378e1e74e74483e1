package effect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Once records the business effect key (scope, key) in db, normally the
// handler's transaction, and reports whether this is the first time: a
// handler applies its effect only when first is true, in the same
// transaction, so the key and the effect commit together or not at all.
//
// Concurrent transactions with one key are serialised by the table's unique
// key: the second waits until the first ends, and then sees first == false
// if the first committed, true if it rolled back.
//
// Keys live in hookinbox_effect_once until PruneOnce deletes them (see the
// package documentation, "Retention").
func Once(ctx context.Context, db DBTX, scope, key string) (first bool, err error) {
	if scope == "" || key == "" {
		return false, fmt.Errorf("effect: Once needs a scope and a key (got %q, %q)", scope, key)
	}
	err = db.QueryRow(ctx, `
INSERT INTO hookinbox_effect_once (scope, key) VALUES ($1, $2)
ON CONFLICT (scope, key) DO NOTHING
RETURNING true`, scope, key).Scan(&first)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("effect: once %s/%s: %w", scope, key, err)
	}
	return first, nil
}

// PruneOnce deletes the effect keys recorded before cutoff, and returns how
// many it deleted. A pruned key's effect can be applied again: keep keys
// longer than any redelivery or replay you expect.
func PruneOnce(ctx context.Context, db DBTX, cutoff time.Time) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM hookinbox_effect_once WHERE created_at < $1`, cutoff)
	if err != nil {
		return 0, fmt.Errorf("effect: prune once keys: %w", err)
	}
	return tag.RowsAffected(), nil
}
