package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/hookinbox/hookinbox/internal/testkit/doctest"
)

var (
	// keyRow is a row of docs/configuration.md's generated table.
	keyRow = regexp.MustCompile("^\\| `([^`]+)` \\|")
	// dottedName is a span's leading name made of dotted segments, the
	// way pages write a key (worker.pause_refresh, sources[].reconcile.enabled,
	// config.receiver.listen) or a chart value (receiver.ingress.trustedProxies).
	dottedName = regexp.MustCompile(`^[a-z][A-Za-z0-9_]*(?:\[\])?(?:\.(?:[A-Za-z0-9_]+|<name>)(?:\[\])?)+`)
)

// TestDocumentedKeysExist is issue 42's item 6: a key a page names in code
// (`worker.pause_refresh`, `sources[].reconcile.lookback`,
// `config.receiver.trusted_proxies`) must be a key of docs/configuration.md's
// table, which TestConfigurationDoc generates from the Config structs, or a
// section holding some; a name of the same shape that is not one must be a
// value of the chart's values.yaml (`receiver.shutdownDelaySeconds`).
// A span that quotes the refusal of a typo ("unknown key") is the typo's
// example, not a key.
func TestDocumentedKeysExist(t *testing.T) {
	t.Parallel()
	root := doctest.Root(t)
	keys := map[string]bool{}
	sections := map[string]bool{}
	for _, line := range doctest.Load(t, root, "docs/configuration.md").Lines {
		m := keyRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for key := m[1]; key != ""; {
			keys[key] = true
			i := strings.LastIndex(key, ".")
			if i < 0 {
				sections[strings.TrimSuffix(key, "[]")] = true
				break
			}
			key = strings.TrimSuffix(key[:i], "[]")
			keys[key+"[]"] = true
		}
	}
	if len(keys) < 100 || len(sections) < 5 {
		t.Fatalf("docs/configuration.md's table gave %d keys in %d sections", len(keys), len(sections))
	}
	values := chartValues(t, filepath.Join(root, "charts", "hookinbox", "values.yaml"))
	checked := 0
	for _, page := range doctest.Pages(t, root) {
		for _, s := range page.Spans {
			name := dottedName.FindString(s.Text)
			if name == "" || strings.Contains(s.Text, "unknown key") {
				continue
			}
			key := strings.TrimPrefix(name, "config.")
			first, _, _ := strings.Cut(key, ".")
			if !sections[strings.TrimSuffix(first, "[]")] || hasUpperSegment(key) && !values[name] {
				continue
			}
			checked++
			if !keys[key] && !keys[strings.TrimSuffix(key, "[]")] && !values[name] {
				t.Errorf("%s: `%s` is no key of docs/configuration.md (nor a value of the chart's values.yaml)", page.Where(s.Line), name)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d keys named in the pages: were they read?", checked)
	}
}

// hasUpperSegment reports whether a segment of name starts with a capital:
// a Go name (worker.Route), which no key has.
func hasUpperSegment(name string) bool {
	for _, seg := range strings.Split(name, ".") {
		if seg != "" && seg[0] >= 'A' && seg[0] <= 'Z' {
			return true
		}
	}
	return false
}

// chartValues is every path of the chart's values.yaml (receiver,
// receiver.ingress, receiver.ingress.enabled, …).
func chartValues(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		t.Fatal(err)
	}
	paths := map[string]bool{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, child := range m {
			paths[prefix+k] = true
			walk(prefix+k+".", child)
		}
	}
	walk("", tree)
	return paths
}
