package daemon

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseArgs(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name string
		args []string
		path string
		rest []string
	}{
		{"NoArguments", nil, "", nil},
		{"ConfigOnly", []string{"--config", "f.yaml"}, "f.yaml", nil},
		{"ConfigBeforeVerb", []string{"--config", "f.yaml", "migrate"}, "f.yaml", []string{"migrate"}},
		{"ConfigAfterVerb", []string{"migrate", "--config", "f.yaml"}, "f.yaml", []string{"migrate"}},
		{"ConfigWithEqualsAfterVerb", []string{"migrate", "--config=f.yaml"}, "f.yaml", []string{"migrate"}},
		{"SingleDashAfterVerb", []string{"stats", "-config", "f.yaml", "bank"}, "f.yaml", []string{"stats", "bank"}},
		{"VerbFlagsStay", []string{"send", "--source", "s", "--config", "f.yaml", "--data", "{}"}, "f.yaml",
			[]string{"send", "--source", "s", "--data", "{}"}},
		{"NothingAfterDoubleDashIsOurs", []string{"send", "--", "--config", "x"}, "", []string{"send", "--", "--config", "x"}},
		{"LookalikeFlagIsNotConfig", []string{"send", "--configuration", "x"}, "", []string{"send", "--configuration", "x"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path, rest, err := parseArgs("test", tt.args)
			require.NoError(t, err)
			require.Equal(t, tt.path, path)
			require.Equal(t, tt.rest, rest)
		})
	}

	t.Run("VersionBeforeVerb", func(t *testing.T) {
		t.Parallel()
		_, _, err := parseArgs("test", []string{"--version"})
		require.ErrorIs(t, err, ErrVersion)
	})

	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		for want, args := range map[string][]string{
			"--config given twice":             {"--config", "a", "migrate", "--config", "b"},
			"flag needs an argument: --config": {"migrate", "--config"},
			"flag provided but not defined":    {"--verbose", "migrate"},
		} {
			_, _, err := parseArgs("test", args)
			require.ErrorContains(t, err, want)
		}
	})
}
