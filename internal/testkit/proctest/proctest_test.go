package proctest_test

import (
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/hookinbox/hookinbox/internal/testkit/proctest"
)

// TestMain removes the binaries the tests built, and fails the package when
// a test leaves a goroutine running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		proctest.RemoveBuilds()
		os.Exit(code)
	}))
}

func child(t *testing.T) string {
	t.Helper()
	return proctest.Build(t, "./testdata/child")[0]
}

func TestBuild(t *testing.T) {
	t.Parallel()

	t.Run("OncePerProcessWhateverThePathSpelling", func(t *testing.T) {
		t.Parallel()
		bin := child(t)
		require.Equal(t, []string{bin, bin}, proctest.Build(t, "./testdata/child", "../proctest/testdata/child"))
	})
}

func TestProcess(t *testing.T) {
	t.Parallel()

	t.Run("WaitLineFindsEarlierAndLaterLines", func(t *testing.T) {
		t.Parallel()
		p := proctest.Start(t, exec.Command(child(t), "alpha beta", "gamma"))
		require.Equal(t, "ready", p.WaitLine(t, "ready"))
		require.Equal(t, "alpha beta", p.WaitLine(t, "beta", "alpha"))
		require.Equal(t, 0, p.Terminate(t))
		require.Equal(t, "alpha beta\ngamma\nready\nstopping", p.Log())
	})

	t.Run("WaitUntilReturnsOnceTheConditionHolds", func(t *testing.T) {
		t.Parallel()
		p := proctest.Start(t, exec.Command(child(t)))
		p.WaitUntil(t, proctest.WaitTimeout, func() bool { return p.Log() != "" })
		require.Equal(t, "ready", p.Log())
		p.Stop(t)
	})

	t.Run("KillEndsItWithoutStopping", func(t *testing.T) {
		t.Parallel()
		p := proctest.Start(t, exec.Command(child(t)))
		p.WaitLine(t, "ready")
		p.Kill(t)
		require.NotContains(t, p.Log(), "stopping")
	})
}

func TestRun(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsTheExitCodeAndOutput", func(t *testing.T) {
		t.Parallel()
		code, out := proctest.Run(t, exec.Command(child(t), "fail", "why"))
		require.Equal(t, 3, code)
		require.Equal(t, "fail\nwhy\n", out)
	})
}
