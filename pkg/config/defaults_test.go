package config

import (
	"cmp"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/provider"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

func TestApplyDefaults(t *testing.T) {
	t.Parallel()

	t.Run("FillsZeroValues", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{
			Sources: []SourceConfig{{Name: "stripe"}},
			Worker:  WorkerConfig{Config: worker.Config{Routes: []worker.Route{{Source: "*"}}}},
		}
		cfg.ApplyDefaults()

		require.Equal(t, int32(16), cfg.Database.MaxConns)
		require.Equal(t, LogConfig{Level: "info", Format: "json"}, cfg.Log)
		require.Equal(t, ReceiverConfig{
			Listen:          "127.0.0.1:8080",
			MaxBodyBytes:    1048576,
			AckTimeout:      4 * time.Second,
			ShutdownDelay:   new(5 * time.Second),
			ShutdownTimeout: 10 * time.Second,
			BatcherConfig:   component.BatcherConfig{MaxEvents: 256, Flushers: 4, QueueSize: 1024, SourceShare: 0.5},
			ServerConfig: component.ServerConfig{RetryAfter: 5 * time.Second, MaxInFlight: 1024, SourceShare: 0.5, MaxUnverifiedBytes: 64 << 20, MaxUnverifiedPerClient: 64, MinBodyRate: 16384, BodyGrace: time.Second,
				HTTPConfig: component.HTTPConfig{MaxConnections: 2048, MaxConnectionsPerClient: 512, MaxHeaderBytes: 32768}},
			Rejections: RejectionsConfig{RecorderConfig: component.RecorderConfig{Keep: 20, SampleBurst: 5, SampleEvery: 10 * time.Second}},
		}, cfg.Receiver)
		require.Equal(t, SourceConfig{
			Name:         "stripe",
			Tolerance:    5 * time.Minute,
			MaxBodyBytes: 1048576,
			AckTimeout:   4 * time.Second,
			Queue:        "default",
			Retention:    720 * time.Hour,
			// No provider, so no provider's API root.
			Reconcile: component.ReconcileConfig{Interval: 15 * time.Minute, Lookback: time.Hour},
		}, cfg.Sources[0])
		require.Equal(t, WorkerConfig{
			Listen:      "127.0.0.1:8081",
			Concurrency: 1000,
			Queues:      []string{"default"},
			Config: worker.Config{
				MaxAttempts:       10,
				JobTimeout:        time.Minute,
				RescueAfter:       90 * time.Second,
				FetchCooldown:     10 * time.Millisecond,
				FetchPollInterval: time.Second,
				ReaperInterval:    time.Minute,
				OrphanAfter:       5 * time.Minute,
				PruneInterval:     time.Hour,
				PruneBatch:        1000,
				GroupMaxEvents:    50,
				SoftStopTimeout:   20 * time.Second,
				Isolation:         "read_committed",
				PauseRefresh:      time.Second,
				HeartbeatInterval: 10 * time.Second,
				Routes:            []worker.Route{{Source: "*", Types: []string{"*"}}},
			},
			Pace:            component.Pace{Rate: 500, Batch: 100},
			Unrouted:        UnroutedFailed,
			HardStopTimeout: 5 * time.Second,
			Outbox:          OutboxConfig{Relay: OutboxRelayConfig{Config: relay.Config{Batch: 100, Lease: 2 * time.Minute, PollInterval: time.Second}}},
		}, cfg.Worker)
	})

	t.Run("SourcesInheritReceiverLimits", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{
			Receiver: ReceiverConfig{MaxBodyBytes: 512, AckTimeout: 2 * time.Second},
			Sources: []SourceConfig{
				{Name: "inherits"},
				{Name: "overrides", MaxBodyBytes: 64, AckTimeout: time.Second},
			},
		}
		cfg.ApplyDefaults()

		require.Equal(t, int64(512), cfg.Sources[0].MaxBodyBytes)
		require.Equal(t, 2*time.Second, cfg.Sources[0].AckTimeout)
		require.Equal(t, int64(64), cfg.Sources[1].MaxBodyBytes)
		require.Equal(t, time.Second, cfg.Sources[1].AckTimeout)
	})

	t.Run("SourceLimitsPreferTheirOwnThenThePresetThenTheReceiver", func(t *testing.T) {
		t.Parallel()

		presets := map[string]provider.Preset{
			"big":  {MaxBodyBytes: 25 << 20},
			"fast": {AckTimeout: 2500 * time.Millisecond},
		}
		presetFor := func(name string) (provider.Preset, bool) {
			preset, ok := presets[name]
			return preset, ok
		}
		cfg := &Config{
			Receiver: ReceiverConfig{MaxBodyBytes: 512, AckTimeout: 2 * time.Second},
			Sources: []SourceConfig{
				{Name: "preset-body", Provider: "big"},
				{Name: "preset-ack", Provider: "fast"},
				{Name: "own-beats-preset", Provider: "big", MaxBodyBytes: 64, AckTimeout: time.Second},
				{Name: "unknown-provider", Provider: "nope"},
			},
		}
		cfg.applyDefaults(presetFor)

		limits := func(s SourceConfig) [2]any { return [2]any{s.MaxBodyBytes, s.AckTimeout} }
		require.Equal(t, [2]any{int64(25 << 20), 2 * time.Second}, limits(cfg.Sources[0]), "preset body, receiver ack")
		require.Equal(t, [2]any{int64(512), 2500 * time.Millisecond}, limits(cfg.Sources[1]), "receiver body, preset ack")
		require.Equal(t, [2]any{int64(64), time.Second}, limits(cfg.Sources[2]), "own values")
		require.Equal(t, [2]any{int64(512), 2 * time.Second}, limits(cfg.Sources[3]), "receiver's")

		before := *cfg
		before.Sources = append([]SourceConfig(nil), cfg.Sources...)
		cfg.applyDefaults(presetFor)
		require.Equal(t, before, *cfg, "idempotent")
	})

	t.Run("UsesTheRegisteredPresets", func(t *testing.T) {
		t.Parallel()

		for _, name := range provider.Names() {
			preset, _ := provider.PresetFor(name)
			cfg := &Config{Sources: []SourceConfig{{Name: "s", Provider: name}}}
			cfg.ApplyDefaults()
			require.Equal(t, cmp.Or(preset.MaxBodyBytes, cfg.Receiver.MaxBodyBytes), cfg.Sources[0].MaxBodyBytes, name)
			require.Equal(t, cmp.Or(preset.AckTimeout, cfg.Receiver.AckTimeout), cfg.Sources[0].AckTimeout, name)
		}
		for name, want := range map[string]provider.Preset{
			"github": {MaxBodyBytes: 25 << 20},
			"slack":  {AckTimeout: 2500 * time.Millisecond}, // Under Slack's 3s.
		} {
			if _, ok := provider.PresetFor(name); !ok {
				t.Logf("provider %q is not registered yet", name)
				continue
			}
			cfg := &Config{Sources: []SourceConfig{{Name: name, Provider: name}}}
			cfg.ApplyDefaults()
			require.Equal(t, cmp.Or(want.MaxBodyBytes, defaultReceiverMaxBodyBytes), cfg.Sources[0].MaxBodyBytes, name)
			require.Equal(t, cmp.Or(want.AckTimeout, defaultReceiverAckTimeout), cfg.Sources[0].AckTimeout, name)
		}
	})

	t.Run("RescueAfterFollowsJobTimeout", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{Worker: WorkerConfig{Config: worker.Config{JobTimeout: 10 * time.Minute}}}
		cfg.ApplyDefaults()
		require.Equal(t, 10*time.Minute+30*time.Second, cfg.Worker.RescueAfter)
	})

	t.Run("KeepsSetValues", func(t *testing.T) {
		t.Parallel()

		cfg := validConfig()
		cfg.Worker.Concurrency = 3
		cfg.Worker.Queues = []string{"bank"}
		cfg.Worker.RescueAfter = time.Hour
		cfg.ApplyDefaults()
		require.Equal(t, 3, cfg.Worker.Concurrency)
		require.Equal(t, []string{"bank"}, cfg.Worker.Queues)
		require.Equal(t, time.Hour, cfg.Worker.RescueAfter)
	})

	t.Run("IsIdempotent", func(t *testing.T) {
		t.Parallel()

		once := validConfig()
		twice := validConfig()
		twice.ApplyDefaults()
		require.Equal(t, once, twice)
	})
}

func TestConfigSource(t *testing.T) {
	t.Parallel()

	cfg := validConfig()

	source, ok := cfg.Source("bank")
	require.True(t, ok)
	require.Equal(t, "standardwebhooks", source.Provider)
	require.Same(t, &cfg.Sources[1], source)

	_, ok = cfg.Source("absent")
	require.False(t, ok)
}

// TestDocumentedDefaultsMatchTheConstants keeps config/hookinbox.yaml and
// docs/configuration.md's table from drifting from the defaults
// ApplyDefaults applies: for every scalar key (and a source's tolerance and
// queue), the example's comment says "Default: X", the value it sets is that
// default, and docs/configuration.md's table gives X.
func TestDocumentedDefaultsMatchTheConstants(t *testing.T) {
	t.Parallel()

	defaults := &Config{Sources: []SourceConfig{{}}}
	defaults.ApplyDefaults()
	// documented writes key's default as the docs do.
	documented := func(key string) string {
		if key == "worker.rescue_after" {
			return "job_timeout + " + formatDuration(worker.RescueAfterMarginDefault)
		}
		var v any
		if source, ok := strings.CutPrefix(key, "sources[]."); ok {
			f, _ := fieldNamed(reflect.ValueOf(&defaults.Sources[0]).Elem(), source)
			v = f.Interface()
		} else {
			v = fieldByKey(defaults, key).Interface()
		}
		return documentedValue(key, v)
	}
	keys := slices.DeleteFunc(scalarKeys(reflect.TypeFor[Config]()), func(key string) bool {
		return key == "database.url" // Required: no default.
	})
	keys = append(keys, "sources[].tolerance", "sources[].queue")

	t.Run("ExampleFile", func(t *testing.T) {
		t.Parallel()

		data, err := os.ReadFile("../../config/hookinbox.yaml")
		require.NoError(t, err)
		var doc yaml.Node
		require.NoError(t, yaml.Unmarshal(data, &doc))
		// node returns the key and value nodes of a dotted key; a source's
		// keys are looked up in the first source.
		node := func(key string) (*yaml.Node, *yaml.Node) {
			m := doc.Content[0]
			path := strings.Split(strings.Replace(key, "sources[].", "sources.0.", 1), ".")
			var k *yaml.Node
			for _, name := range path {
				if m.Kind == yaml.SequenceNode {
					m = m.Content[0]
					continue
				}
				i := slices.IndexFunc(m.Content, func(n *yaml.Node) bool { return n.Value == name })
				require.True(t, i >= 0 && i%2 == 0, "config/hookinbox.yaml does not set %s", key)
				k, m = m.Content[i], m.Content[i+1]
			}
			return k, m
		}
		for _, key := range keys {
			k, v := node(key)
			comment := strings.Join(strings.Fields(strings.ReplaceAll(k.HeadComment, "#", "")), " ")
			want := "Default: " + documented(key)
			require.True(t, strings.Contains(comment+" ", want+" ") || strings.Contains(comment, want+".") || strings.Contains(comment, want+","),
				"config/hookinbox.yaml: the comment on %s does not say %q:\n%s", key, want, comment)

			f := reflect.New(fieldByKeyType(key))
			require.NoError(t, decodeValue(f.Elem(), v.Value), key)
			require.Equal(t, documented(key), documentedValue(key, f.Elem().Interface()), "config/hookinbox.yaml sets %s to %s, not its default", key, v.Value)
		}
	})

	t.Run("ConfigurationDoc", func(t *testing.T) {
		t.Parallel()

		data, err := os.ReadFile(configurationDoc)
		require.NoError(t, err)
		_, section, found := strings.Cut(string(data), docTableBegin)
		require.True(t, found, "docs/configuration.md has no generated table")
		table := map[string]string{}
		for line := range strings.Lines(section) {
			cells := strings.Split(line, "|")
			if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
				continue
			}
			names := strings.FieldsFunc(cells[1], func(r rune) bool { return r == '/' || r == ',' })
			values := strings.Split(cells[2], " / ")
			for i, name := range names {
				value := values[min(i, len(values)-1)]
				table[strings.Trim(strings.TrimSpace(name), "`")] = strings.Trim(strings.TrimSpace(value), "`")
			}
		}
		for _, key := range keys {
			got, ok := table[key]
			require.True(t, ok, "docs/configuration.md's table has no row for %s", key)
			require.Equal(t, documented(key), got, "docs/configuration.md's table: the default of %s", key)
		}
	})
}

// formatDuration writes d as the docs do: "1m" rather than "1m0s".
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// fieldByKeyType is the type of the field key names.
func fieldByKeyType(key string) reflect.Type {
	if source, ok := strings.CutPrefix(key, "sources[]."); ok {
		f, _ := fieldNamed(reflect.ValueOf(&SourceConfig{}).Elem(), source)
		return f.Type()
	}
	return fieldByKey(&Config{}, key).Type()
}

// documentedValue writes a value set in the example as documented writes
// its key's default; worker.rescue_after's default derives from
// worker.job_timeout, so its set value is compared with the derived one.
func documentedValue(key string, v any) string {
	if key == "worker.rescue_after" {
		if v == worker.JobTimeoutDefault+worker.RescueAfterMarginDefault {
			return "job_timeout + " + formatDuration(worker.RescueAfterMarginDefault)
		}
	}
	if d, ok := v.(*time.Duration); ok && d != nil {
		v = *d // receiver.shutdown_delay, whose explicit 0s is kept
	}
	if d, ok := v.(time.Duration); ok {
		return formatDuration(d)
	}
	// A key that is off unless set (worker.admin.token, tracing.endpoint)
	// is documented as "Default: empty".
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.String && rv.Len() == 0 { // secret.String too
		return "empty"
	}
	return fmt.Sprint(v)
}
