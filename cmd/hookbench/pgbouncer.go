package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookinbox/hookinbox/internal/testkit/pgbouncer"
)

// pgBouncer is PgBouncer in transaction pooling mode in front of the
// benchmark's server, started by startPgBouncer.
type pgBouncer struct {
	*pgbouncer.Bouncer
	done chan struct{}
}

// startPgBouncer starts bin in front of the server adminURL names (see
// internal/testkit/pgbouncer) and waits until it answers. Its log goes to
// logDir/pgbouncer.log.
func startPgBouncer(ctx context.Context, bin, adminURL, logDir string) (*pgBouncer, error) {
	prepared, err := pgbouncer.Prepare(bin, adminURL, 2000)
	if err != nil {
		return nil, err
	}
	b := &pgBouncer{Bouncer: prepared, done: make(chan struct{})}
	logFile, err := os.Create(filepath.Join(logDir, "pgbouncer.log"))
	if err != nil {
		b.Remove()
		return nil, err
	}
	defer logFile.Close()
	b.Cmd.Stdout, b.Cmd.Stderr = logFile, logFile
	if err := b.Cmd.Start(); err != nil {
		b.Remove()
		return nil, fmt.Errorf("start pgbouncer: %w", err)
	}
	b.Started()
	go func() { _ = b.Cmd.Wait(); close(b.done) }()
	if err := b.waitUp(ctx, adminURL); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}

// waitUp connects through PgBouncer until it answers, for 10 s at most.
func (b *pgBouncer) waitUp(ctx context.Context, adminURL string) error {
	probe, err := b.URL(adminURL)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := pgx.Connect(ctx, probe)
		if err == nil {
			return conn.Close(ctx)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgbouncer did not answer within 10 s: %w", err)
		}
		select {
		case <-b.done:
			return fmt.Errorf("pgbouncer exited: %v", b.Cmd.ProcessState)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends PgBouncer and removes its folder.
func (b *pgBouncer) stop() {
	_ = b.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(10 * time.Second):
		_ = b.Cmd.Process.Kill()
		<-b.done
	}
	b.Remove()
}
