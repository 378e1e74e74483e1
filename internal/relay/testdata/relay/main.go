// Command relay runs an outbox relay for internal/relay's crash test: one HTTP
// destination, "billing", at SINK_URL, signed with SINK_SECRET, on the
// database at DATABASE_URL, with the batch and lease RELAY_BATCH and
// RELAY_LEASE give. It prints "relay started" and runs until SIGTERM.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "relay:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	dest, err := relay.NewHTTP(&relay.HTTPConfig{URL: os.Getenv("SINK_URL"), Secret: secret.String(os.Getenv("SINK_SECRET"))})
	if err != nil {
		return err
	}
	batch, _ := strconv.Atoi(os.Getenv("RELAY_BATCH"))
	lease, err := time.ParseDuration(os.Getenv("RELAY_LEASE"))
	if err != nil {
		return err
	}
	r, err := relay.New(pool, &relay.Config{
		Batch: batch, Lease: lease,
		Destinations: map[string]*relay.DestinationConfig{"billing": {Destination: dest, Concurrency: batch}},
	})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	fmt.Println("relay started")
	<-ctx.Done()
	return r.Stop(context.Background())
}
