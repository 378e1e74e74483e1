package faults_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMutantsApply checks that every mutant of `make soak-mutants` still
// applies to the tree: a patch that a later change made stale would
// otherwise only show when the mutants run, as a mutant not tried.
func TestMutantsApply(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	patches, err := filepath.Glob("mutants/*.patch")
	require.NoError(t, err)
	require.NotEmpty(t, patches)
	for _, p := range patches {
		out, err := exec.Command("git", "-C", "../..", "apply", "--check", filepath.Join("internal/faults", p)).CombinedOutput()
		require.NoError(t, err, "%s does not apply to the tree: %s", p, out)
	}
}
