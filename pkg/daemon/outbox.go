package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookinbox/hookinbox/internal/jetstream"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// outboxRelay returns the outbox relay's configuration for env's worker,
// with a destination built for each of worker.destinations, and false when
// the worker runs no relay: worker.outbox.relay.disabled is true, or no
// destination is configured and the relay would have nothing to deliver to.
func outboxRelay(env *Env) (*relay.Config, bool, error) {
	wc := env.Config.Worker
	if wc.Outbox.Relay.Disabled || len(wc.Destinations) == 0 {
		return nil, false, nil
	}
	rc := wc.Outbox.Relay.Config // batch, lease and poll_interval, as configured
	rc.Destinations = make(map[string]*relay.DestinationConfig, len(wc.Destinations))
	rc.PollOnly = env.Config.Database.TransactionPooled()
	rc.Logger = env.Logger.Named("outbox")
	rc.Observe = env.outboxMetrics().Delivery
	for _, name := range slices.Sorted(maps.Keys(wc.Destinations)) {
		d := wc.Destinations[name]
		dest, err := newDestination(&d, wc.Outbox.Relay.Lease)
		if err != nil {
			closeDestinations(&rc)
			return nil, false, fmt.Errorf("worker.destinations.%s: %w", name, err)
		}
		policy := d.DestinationConfig // concurrency, rate, max_attempts and backoff, as configured
		policy.Destination = dest
		rc.Destinations[name] = &policy
	}
	return &rc, true, nil
}

// natsDialTimeout is added to a nats destination's timeout to bound its
// start-up: connecting, and checking or creating its stream.
const natsDialTimeout = 5 * time.Second

// newDestination builds one configured destination. A stream that a nats
// destination creates gets a duplicate window of twice the relay's lease at
// least: the re-sends after a relay's crash come a lease after the first
// publish, and the window must still hold its id then.
func newDestination(d *config.DestinationConfig, lease time.Duration) (outbox.Destination, error) {
	switch d.Kind {
	case config.DestinationHTTP:
		return relay.NewHTTP(&relay.HTTPConfig{URL: d.URL.Reveal(), Secret: d.Secret, Timeout: d.Timeout})
	case config.DestinationNATS:
		// Connecting (and creating the stream) is bounded like a delivery,
		// plus the time to dial.
		ctx, cancel := context.WithTimeout(context.Background(), d.Timeout+natsDialTimeout)
		defer cancel()
		return jetstream.NewDestination(ctx, &jetstream.DestinationConfig{
			Publisher: jetstream.Config{
				URL: d.URL.Reveal(), Stream: d.Stream, Subjects: d.Subjects, CreateStream: d.CreateStream, AckTimeout: d.Timeout,
				Duplicates: max(jetstream.DuplicatesDefault, 2*lease),
			},
			Subject: d.Subject,
		})
	}
	return nil, fmt.Errorf("unknown kind %q", d.Kind)
}

// closeDestinations closes the destinations built so far that hold a
// connection.
func closeDestinations(rc *relay.Config) {
	for _, d := range rc.Destinations {
		if c, ok := d.Destination.(interface{ Close() }); ok {
			c.Close()
		}
	}
}
