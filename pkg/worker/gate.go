package worker

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// isSnooze reports whether err asks River to snooze the job.
func isSnooze(err error) bool {
	var snooze *rivertype.JobSnoozeError
	return errors.As(err, &snooze)
}

// txOptions are the options of an event's own transaction: its isolation
// level and, with asyncCommit, synchronous_commit off (see
// inboxstore.WorkTxOptions), in one round trip.
func txOptions(asyncCommit bool, iso Isolation) pgx.TxOptions {
	opts := inboxstore.WorkTxOptions(asyncCommit)
	if opts.BeginQuery == "" {
		opts.IsoLevel = iso.txIsoLevel()
		return opts
	}
	opts.BeginQuery = fmt.Sprintf("BEGIN ISOLATION LEVEL %s; SET LOCAL synchronous_commit = off", iso.txIsoLevel())
	return opts
}
