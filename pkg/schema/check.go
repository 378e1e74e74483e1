package schema

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgerrcode"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// ErrTooOld is wrapped by Check when the database lacks migrations this build
// needs. The fix is the migrate command of the binary that brings the missing
// set (`inboxctl migrate` for the core set); Check's message does not name
// it, because only the caller knows which binary it is (pkg/daemon appends
// it).
var ErrTooOld = errors.New("database schema is older than this build needs")

// tooOldError is the error Check returns: its own message, matching ErrTooOld.
type tooOldError struct{ msg string }

func (e *tooOldError) Error() string { return e.msg }
func (e *tooOldError) Unwrap() error { return ErrTooOld }

func tooOldf(format string, args ...any) error {
	return &tooOldError{msg: ErrTooOld.Error() + " (" + fmt.Sprintf(format, args...) + ")"}
}

// Check returns an error wrapping ErrTooOld when River's schema or any of the
// sets is behind this build, or when the database has never been migrated
// ("the database has no hookinbox schema"). A newer schema is accepted: a
// rolling upgrade migrates first, while old pods still run. Any other error
// (the database cannot be reached) is returned wrapped.
func Check(ctx context.Context, pool *pgxpool.Pool, sets ...*Set) error {
	var haveHookinbox, haveRiver bool
	err := pool.QueryRow(ctx, `SELECT to_regclass('hookinbox_migration') IS NOT NULL, to_regclass('river_migration') IS NOT NULL`).
		Scan(&haveHookinbox, &haveRiver)
	if err != nil {
		return fmt.Errorf("schema: check: %w", err)
	}
	if !haveHookinbox && !haveRiver {
		return &tooOldError{msg: "the database has no hookinbox schema"}
	}

	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("schema: river migrator: %w", err)
	}
	res, err := migrator.Validate(ctx, nil)
	if err != nil {
		if isUndefinedTable(err) {
			return tooOldf("River's tables are missing")
		}
		return fmt.Errorf("schema: check river schema: %w", err)
	}
	if !res.OK {
		return tooOldf("River: %s", strings.Join(res.Messages, "; "))
	}

	for _, set := range sets {
		need, err := set.latest()
		if err != nil {
			return err
		}
		var have int
		err = pool.QueryRow(ctx,
			"SELECT coalesce(max(version), 0) FROM hookinbox_migration WHERE set_name = $1", set.Name).Scan(&have)
		if err != nil {
			if isUndefinedTable(err) {
				return tooOldf("%s is at version 0, this build needs %d", set.Name, need)
			}
			return fmt.Errorf("schema: check %s schema: %w", set.Name, err)
		}
		if have < need {
			return tooOldf("%s is at version %d, this build needs %d", set.Name, have, need)
		}
	}
	return nil
}

func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code == pgerrcode.UndefinedTable
	}
	return strings.Contains(err.Error(), "SQLSTATE "+pgerrcode.UndefinedTable)
}
