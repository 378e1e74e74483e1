package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
			Unrouted:          UnroutedDone,
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
