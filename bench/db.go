package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/hookinbox/hookinbox/internal/inboxstore"
)

// createDatabase creates database name on the server adminURL points at and
// returns a URL of the same server naming it.
func createDatabase(ctx context.Context, adminURL, name string) (string, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", fmt.Errorf("connect to DATABASE_URL: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return withDatabase(adminURL, name)
}

// dropDatabase drops database name, disconnecting whoever is left on it.
func dropDatabase(adminURL, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// withDatabase returns dsn (a URL or a key=value string) naming database
// name instead of its own.
func withDatabase(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("DATABASE_URL is not a valid URL")
		}
		u.Path = "/" + name
		return u.String(), nil
	}
	// A key=value string: a later key wins.
	return dsn + " dbname=" + name, nil
}

// newPool opens a pool of at most conns connections.
func newPool(ctx context.Context, dbURL string, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return nil, err
	}
	cfg.MaxConns = int32(conns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// newIngester returns an Ingester on pool with an insert-only River client,
// configured as the receiver configures its own.
func newIngester(pool *pgxpool.Pool) (*inboxstore.Ingester, error) {
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Logger:      slog.New(slog.DiscardHandler),
		MaxAttempts: 10,
	})
	if err != nil {
		return nil, err
	}
	return inboxstore.NewIngester(pool, client, &inboxstore.IngesterConfig{}), nil
}

// resetTables empties the inbox, River's jobs and the ledger, so that the
// next phase starts from a known state, and checkpoints, so that writing
// out the last phase's pages does not land in the next measurement. No
// process may be using the tables.
func (b *bench) resetTables(ctx context.Context) error {
	if err := truncateTables(ctx, b.pool); err != nil {
		return fmt.Errorf("reset tables: %w", err)
	}
	return settle(ctx, b.pool)
}

// settle runs VACUUM ANALYZE on the tables a preload filled and a
// CHECKPOINT, so that neither autovacuum nor a checkpoint of the preload
// lands in the next measurement.
func settle(ctx context.Context, pool *pgxpool.Pool, tables ...string) error {
	if err := vacuum(ctx, pool, tables...); err != nil {
		return err
	}
	// CHECKPOINT needs superuser or pg_checkpoint; without it, a checkpoint
	// may land in the next measurement, which is noise rather than an error.
	_, _ = pool.Exec(ctx, "CHECKPOINT")
	return nil
}
