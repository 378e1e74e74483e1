package worker_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
	"github.com/hookinbox/hookinbox/pkg/inbox"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// A handler's error is written on the row (RecordFailure's last_error, a
// text) and, by River, in the job's errors (jsonb). Found by the review of
// issue 41's refactor (and older than it): an error that quotes a NUL byte
// (a downstream answer, say) was refused by both, PostgreSQL's text taking
// no NUL (22021) and jsonb no \u0000 (22P05). The row recorded no attempt,
// and River's completer could not settle the job (nor any other job
// completed in the same batch): the job stayed running, the row pending,
// until River's rescuer ran it again, to the same end. Now the text is made
// storable (inboxstore.Storable), and an event whose handlers fail for good
// is failed after its attempts.
func TestAFailureQuotingANulByteIsRecorded(t *testing.T) {
	t.Parallel()
	b := startFailingWith(t, "downstream answered \x00\x01")
	id := b.ingest(t, "evt_nul", "nul")
	r := b.waitStatus(t, id, inbox.StatusFailed)
	require.Equal(t, 3, r.Attempts)
	require.Zero(t, b.effects(t, "evt_nul"))
}

// The same failure, seen from the events after it: River's batch completer
// could not write the NUL job's error, requeued the batch, and every later
// completion joined the requeued batch, which never committed. The worker
// went on committing events (their rows done) but none of their jobs was
// settled again: they stayed running until the completer's backlog stopped
// the worker's executors, and, after a restart, until River's rescuer.
func TestAFailureQuotingANulByteLeavesTheOtherJobsSettled(t *testing.T) {
	t.Parallel()
	b := startFailingWith(t, "downstream answered \x00")
	b.ingest(t, "evt_nul", "nul")
	poll(t, 30*time.Second, "the failing event's handlers to run", func() (bool, error) {
		n, ok := b.runs.Load("evt_nul")
		return ok && n.(*atomic.Int64).Load() > 0, nil
	})
	var last int64
	for i := range 20 {
		last = b.ingest(t, fmt.Sprintf("evt_after_%02d", i), "account.deposit")
		b.waitStatus(t, last, inbox.StatusDone)
	}
	require.Equal(t, "completed", b.jobState(t, last))
}

// startFailingWith starts a worker whose events of type "nul" (source bank)
// run the effect handler, then one that fails with msg.
func startFailingWith(t *testing.T, msg string) *testBundle {
	t.Helper()
	b := setup(t)
	b.start(t, func(c *worker.Config) {
		c.Registry.Register("nul", func(context.Context, pgx.Tx, inbox.Event) error {
			return errors.New(msg)
		})
		c.Routes = append([]worker.Route{{Source: "bank", Types: []string{"nul"}, Handlers: []string{"effect", "nul"}}}, c.Routes...)
	})
	return b
}

func TestStorable(t *testing.T) {
	t.Parallel()
	require.Equal(t, "plain", inboxstore.Storable("plain"))
	require.Equal(t, `a\x00b\x00`, inboxstore.Storable("a\x00b\x00"))
	require.Equal(t, "bad \uFFFD byte", inboxstore.Storable("bad \xff byte"))
	require.False(t, strings.ContainsRune(inboxstore.Storable("\x00\xfe"), 0))
}
