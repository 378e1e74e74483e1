package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// ErrTooOld is wrapped by Check when the database lacks migrations this build
// needs. The fix is `inboxctl migrate`.
var ErrTooOld = errors.New("database schema is older than this build needs; run `inboxctl migrate`")

// Check returns an error wrapping ErrTooOld when River's schema or any of the
// sets is behind this build. A newer schema is accepted: a rolling upgrade
// migrates first, while old pods still run.
func Check(ctx context.Context, pool *pgxpool.Pool, sets ...*Set) error {
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("schema: river migrator: %w", err)
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		if isUndefinedTable(err) {
			return fmt.Errorf("%w (River's tables are missing)", ErrTooOld)
		}
		return fmt.Errorf("schema: check river schema: %w", err)
	}
	if !res.OK {
		return fmt.Errorf("%w (River: %s)", ErrTooOld, strings.Join(res.Messages, "; "))
	}

	for _, set := range sets {
		need, err := set.Latest()
		if err != nil {
			return err
		}
		var have int
		err = pool.QueryRow(ctx,
			"SELECT coalesce(max(version), 0) FROM hookinbox_migration WHERE set_name = $1", set.Name).Scan(&have)
		if err != nil {
			if isUndefinedTable(err) {
				return fmt.Errorf("%w (%s is at version 0, this build needs %d)", ErrTooOld, set.Name, need)
			}
			return fmt.Errorf("schema: check %s schema: %w", set.Name, err)
		}
		if have < need {
			return fmt.Errorf("%w (%s is at version %d, this build needs %d)", ErrTooOld, set.Name, have, need)
		}
	}
	return nil
}

func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == "42P01"
	}
	return strings.Contains(err.Error(), "SQLSTATE 42P01")
}
