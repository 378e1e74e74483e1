package metrics_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookinbox/hookinbox/internal/metrics"
	"github.com/hookinbox/hookinbox/internal/testkit/doctest"
)

// describer is a prometheus.Registerer that keeps the names of what is
// registered on it.
type describer map[string]bool

func (d describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		d.describe(desc)
	}
	return nil
}

func (d describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		_ = d.Register(c)
	}
}

func (describer) Unregister(prometheus.Collector) bool { return false }

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

func (d describer) describe(desc *prometheus.Desc) {
	if m := fqName.FindStringSubmatch(desc.String()); m != nil {
		d[m[1]] = true
	}
}

// metricNames is every metric hookinbox's code exports, by its name.
func metricNames() describer {
	d := describer{}
	zero := func() int { return 0 }
	metrics.NewReceiver(d, &metrics.ReceiverConfig{InFlight: zero, Queued: zero})
	metrics.NewWorker(d)
	metrics.NewOutbox(d)
	metrics.NewReconcile(d)
	metrics.NewSecrets(d)
	d.MustRegister(metrics.NewBacklog(nil, &metrics.BacklogConfig{}), metrics.NewDurability(&metrics.DurabilityConfig{}),
		metrics.NewOutboxBacklog(nil, &metrics.OutboxBacklogConfig{}))
	return d
}

var (
	metricName = regexp.MustCompile(`\bhookinbox_[a-z0-9_]+`)
	alertName  = regexp.MustCompile(`\bHookinbox[A-Z][A-Za-z]+\b`)
	ruleAlert  = regexp.MustCompile(`(?m)^\s*- alert: (\S+)\s*$`)
)

// TestDocumentedMetricsExist is issue 42's item 6: every hookinbox_… name a
// page uses must be a metric the code exports (a histogram's _bucket, _sum
// and _count too, and a name ending in _ the prefix of one) or a table or
// function of the schema's migrations; and every metric the code exports
// must be in docs/operations.md, whose Metrics table lists them.
func TestDocumentedMetricsExist(t *testing.T) {
	t.Parallel()
	root := doctest.Root(t)
	names := metricNames()
	check := func(ok bool, format string, args ...any) {
		if !ok {
			t.Errorf(format, args...)
		}
	}
	check(len(names) > 20, "only %d metrics found in internal/metrics", len(names))
	schema := schemaText(t, root)
	for _, page := range doctest.Pages(t, root) {
		for i, line := range page.Lines {
			for _, name := range metricName.FindAllString(line, -1) {
				check(isMetric(names, name) || regexp.MustCompile(`\b`+name+`\b`).MatchString(schema),
					"%s: %s is no metric of internal/metrics (nor a table of migrations/)", page.Where(i+1), name)
			}
		}
	}
	operations := strings.Join(doctest.Load(t, root, "docs/operations.md").Lines, "\n")
	for name := range names {
		check(strings.Contains(operations, "`"+name+"`"), "metric %s is not in docs/operations.md's Metrics table", name)
	}
}

// isMetric reports whether name is one of names, one of a histogram's
// series, or (ending in _) the prefix of one.
func isMetric(names describer, name string) bool {
	if strings.HasSuffix(name, "_") {
		for n := range names {
			if strings.HasPrefix(n, name) {
				return true
			}
		}
		return false
	}
	for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
		if names[strings.TrimSuffix(name, suffix)] && (suffix == "" || strings.HasSuffix(name, suffix)) {
			return true
		}
	}
	return false
}

// schemaText is the text of every migration of the repository (the core
// set's and the examples') and of pkg/schema, which names its own table.
func schemaText(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if strings.HasSuffix(path, ".sql") || (filepath.Dir(rel) == filepath.Join("pkg", "schema") && !strings.HasSuffix(path, "_test.go")) {
			data, err := os.ReadFile(path)
			b.Write(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDocumentedAlertsExist is issue 42's item 6: every Hookinbox… alert a
// page names must be one of the chart's PrometheusRule, and where a table
// row describes an alert (its first cell the alert's name), every metric
// its second cell ("fires when") names must be one the rule's expression
// uses: the 3 a.m. example named a metric no shipped alert read.
func TestDocumentedAlertsExist(t *testing.T) {
	t.Parallel()
	root := doctest.Root(t)
	data, err := os.ReadFile(filepath.Join(root, "charts", "hookinbox", "templates", "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]string{} // alert → its rule's text
	bounds := ruleAlert.FindAllSubmatchIndex(data, -1)
	for i, m := range bounds {
		end := len(data)
		if i+1 < len(bounds) {
			end = bounds[i+1][0]
		}
		rules[string(data[m[2]:m[3]])] = string(data[m[1]:end])
	}
	if len(rules) < 5 {
		t.Fatalf("only %d alerts found in the chart's prometheusrule.yaml", len(rules))
	}
	for _, page := range doctest.Pages(t, root) {
		for i, line := range page.Lines {
			for _, name := range alertName.FindAllString(line, -1) {
				if _, ok := rules[name]; !ok {
					t.Errorf("%s: %s is no alert of charts/hookinbox/templates/prometheusrule.yaml", page.Where(i+1), name)
				}
			}
			cells := strings.Split(line, "|")
			if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(line), "|") {
				continue
			}
			alert := alertName.FindString(cells[1])
			rule, ok := rules[alert]
			if !ok || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`"+alert+"`") {
				continue
			}
			for _, metric := range metricName.FindAllString(cells[2], -1) {
				if !slices.Contains(metricName.FindAllString(rule, -1), metric) {
					t.Errorf("%s: the row of %s says it fires on %s, which its rule does not read", page.Where(i+1), alert, metric)
				}
			}
		}
	}
}
