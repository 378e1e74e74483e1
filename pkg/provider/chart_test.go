package provider_test

import (
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/provider"
)

// TestChartKnowsTheBodyPresets keeps the chart's copy of the presets' body
// limits (charts/hookinbox/templates/_helpers.tpl, hookinbox.maxBodyBytes,
// from which the Ingress's proxy-body-size derives) in step with the
// presets: a preset that raises the body limit, missing there, would have
// nginx refuse that provider's large deliveries.
func TestChartKnowsTheBodyPresets(t *testing.T) {
	t.Parallel()
	tpl, err := os.ReadFile("../../charts/hookinbox/templates/_helpers.tpl")
	require.NoError(t, err)
	line := regexp.MustCompile(`\$presets := dict((?: "[a-z0-9]+" [0-9]+)*) -}}`).FindSubmatch(tpl)
	require.NotNil(t, line, "hookinbox.maxBodyBytes's $presets line")
	chart := map[string]int64{}
	for _, m := range regexp.MustCompile(`"([a-z0-9]+)" ([0-9]+)`).FindAllSubmatch(line[1], -1) {
		n, err := strconv.ParseInt(string(m[2]), 10, 64)
		require.NoError(t, err)
		chart[string(m[1])] = n
	}
	want := map[string]int64{}
	for _, name := range provider.Names() {
		if p, _ := provider.PresetFor(name); p.MaxBodyBytes != 0 {
			want[name] = p.MaxBodyBytes
		}
	}
	require.NotEmpty(t, want)
	require.Equal(t, want, chart)
}
