package config

import (
	"cmp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hookinbox/hookinbox/pkg/provider"
)

func TestApplyDefaults(t *testing.T) {
	t.Parallel()

	t.Run("FillsZeroValues", func(t *testing.T) {
		t.Parallel()

		cfg := &Config{
			Sources: []SourceConfig{{Name: "stripe"}},
			Worker:  WorkerConfig{Routes: []RouteConfig{{Source: "*"}}},
		}
		cfg.ApplyDefaults()

		require.Equal(t, int32(16), cfg.Database.MaxConns)
		require.Equal(t, LogConfig{Level: "info", Format: "json"}, cfg.Log)
		require.Equal(t, ReceiverConfig{
			Listen:          "127.0.0.1:8080",
			MaxBodyBytes:    1048576,
			AckTimeout:      4 * time.Second,
			RetryAfter:      5 * time.Second,
			ShutdownTimeout: 10 * time.Second,
			BatchMaxEvents:  256, BatchFlushers: 4, BatchQueue: 1024, MaxInFlight: 1024,
		}, cfg.Receiver)
		require.Equal(t, SourceConfig{
			Name:         "stripe",
			Tolerance:    5 * time.Minute,
			MaxBodyBytes: 1048576,
			AckTimeout:   4 * time.Second,
			Queue:        "default",
		}, cfg.Sources[0])
		require.Equal(t, WorkerConfig{
			Listen:            "127.0.0.1:8081",
			Concurrency:       32,
			Queues:            []string{"default"},
			MaxAttempts:       10,
			JobTimeout:        time.Minute,
			RescueAfter:       90 * time.Second,
			FetchCooldown:     10 * time.Millisecond,
			FetchPollInterval: time.Second,
			ReaperInterval:    time.Minute,
			OrphanAfter:       5 * time.Minute,
			Unrouted:          UnroutedFailed,
			SoftStopTimeout:   20 * time.Second,
			HardStopTimeout:   5 * time.Second,
			Routes:            []RouteConfig{{Source: "*", Types: []string{"*"}}},
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

		cfg := &Config{Worker: WorkerConfig{JobTimeout: 10 * time.Minute}}
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
