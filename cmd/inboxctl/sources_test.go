package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestPauseAndResumeExitAlike is issue 42's item 6: pause of a paused
// source exited 0, resume of a running one 1. Both now exit 0 and say the
// state they found; counts are said in the singular for one.
func TestPauseAndResumeExitAlike(t *testing.T) {
	t.Parallel()
	path := writeStripeConfig(t, dbtest.New(t).URL, "")
	for _, step := range []struct{ verb, says string }{
		{"pause", "paused stripe"},
		{"pause", "stripe was already paused"},
		{"resume", "resumed stripe: 0 held events enqueued"},
		{"resume", "stripe was not paused"},
	} {
		code, stdout, stderr := inboxctl(t, "--config", path, "sources", step.verb, "stripe")
		require.Zero(t, code, "sources %s: %s", step.verb, stderr)
		require.Contains(t, stdout, step.says)
	}
	require.Equal(t, "1 event", count(1, "event"))
	require.Equal(t, "0 held events", count(0, "held event"))
}

// TestErrorsHaveNoPackagePrefix is issue 42's item 6: an unknown source
// said "inboxctl: admin: no such source in the config".
func TestErrorsHaveNoPackagePrefix(t *testing.T) {
	t.Parallel()
	path := writeStripeConfig(t, dbtest.New(t).URL, "")
	code, _, stderr := inboxctl(t, "--config", path, "sources", "pause", "nosuch")
	require.NotZero(t, code)
	require.Equal(t, "inboxctl: no such source in the config: \"nosuch\"\n", stderr)
}
