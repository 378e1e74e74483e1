package daemon_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/internal/testkit/dbtest"
)

// TestInboxctl drives the inboxctl binary: argument order, advice and a
// quiet log.
func TestInboxctl(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds inboxctl")
	}

	for _, order := range [][]string{
		{"--config", "F", "migrate"},
		{"--config=F", "migrate"},
		{"migrate", "--config", "F"},
		{"migrate", "-config=F"},
	} {
		t.Run(fmt.Sprintf("ConfigBeforeOrAfterTheCommand/%q", order), func(t *testing.T) {
			t.Parallel()
			db := dbtest.NewEmpty(t)
			path := writeConfig(t, daemonConfig(db.URL))
			code, out := run(t, "inboxctl", withPath(order, path)...)
			require.Equal(t, 0, code, out)
			require.Contains(t, out, "applied core 0001_")

			code, out = run(t, "inboxctl", withPath([]string{"stats", "--config", "F"}, path)...)
			require.Equal(t, 0, code, out)
			require.Equal(t, "pending 0\ndone 0\nfailed 0\n", out, "nothing logged at info")
		})
	}

	t.Run("StatsBeforeMigrateSaysToMigrate", func(t *testing.T) {
		t.Parallel()
		db := dbtest.NewEmpty(t)
		path := writeConfig(t, daemonConfig(db.URL))
		code, out := run(t, "inboxctl", "stats", "--config", path)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "the database has no hookinbox schema; run `inboxctl migrate --config "+path+"`")
		require.NotContains(t, out, "does not exist")
	})

	t.Run("MigrateLogsNoConfigAtInfo", func(t *testing.T) {
		t.Parallel()
		db := dbtest.NewEmpty(t)
		code, out := run(t, "inboxctl", "--config", writeConfig(t, daemonConfig(db.URL)), "migrate")
		require.Equal(t, 0, code, out)
		require.NotContains(t, out, `"config"`)
		require.NotContains(t, out, `"level"`, "no log line at all")
	})

	t.Run("UnreachableDatabaseFailsAtOnce", func(t *testing.T) {
		t.Parallel()
		path := writeConfig(t, daemonConfig("postgres://postgres@127.0.0.1:1/postgres"))
		for _, command := range []string{"stats", "migrate"} {
			code, out := run(t, "inboxctl", command, "--config", path)
			require.Equal(t, 1, code, out)
			require.Contains(t, out, "cannot reach PostgreSQL")
			require.Contains(t, out, "connection refused")
		}
	})

	t.Run("ConfigGivenTwiceIsRefused", func(t *testing.T) {
		t.Parallel()
		code, out := run(t, "inboxctl", "--config", "a.yaml", "stats", "--config", "b.yaml")
		require.Equal(t, 2, code, out, "a usage error")
		require.Contains(t, out, "--config given twice")
	})
}

// withPath replaces F in args by path.
func withPath(args []string, path string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		switch a {
		case "F":
			out[i] = path
		case "--config=F", "-config=F":
			out[i] = a[:len(a)-1] + path
		default:
			out[i] = a
		}
	}
	return out
}
