// Package logging builds hookinbox's zap logger and bridges it to the
// *slog.Logger that River wants, in one place.
package logging

import (
	"fmt"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"
)

// New returns a logger at level (debug, info, warn, error) in format (json
// or console), writing to standard error.
func New(level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("logging: %w", err)
	}
	var cfg zap.Config
	switch format {
	case "json", "":
		cfg = zap.NewProductionConfig()
	case "console":
		cfg = zap.NewDevelopmentConfig()
	default:
		return nil, fmt.Errorf("logging: unknown format %q (json or console)", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.Sampling = nil
	cfg.EncoderConfig.TimeKey = "ts"
	cfg.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	cfg.DisableStacktrace = true
	return cfg.Build()
}

// Slog returns an *slog.Logger writing through logger's core, for River.
func Slog(logger *zap.Logger) *slog.Logger {
	return slog.New(zapslog.NewHandler(logger.Core(), zapslog.WithName(logger.Name())))
}
