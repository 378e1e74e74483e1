package daemon

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hookinbox/hookinbox/pkg/config"
	"github.com/hookinbox/hookinbox/pkg/outbox"
)

// OutboxRelay returns the outbox relay's configuration for env's worker,
// with a destination built for each of worker.destinations; nil when
// worker.outbox.relay.disabled is true, or when no destination is
// configured and the relay would have nothing to deliver to.
func OutboxRelay(env *Env) (*outbox.RelayConfig, error) {
	wc := env.Config.Worker
	if wc.Outbox.Relay.Disabled || len(wc.Destinations) == 0 {
		return nil, nil
	}
	rc := &outbox.RelayConfig{
		Destinations: make(map[string]*outbox.RelayDestination, len(wc.Destinations)),
		Batch:        wc.Outbox.Relay.Batch,
		Lease:        wc.Outbox.Relay.Lease,
		PollInterval: wc.Outbox.Relay.PollInterval,
		PollOnly:     env.Config.Database.TransactionPooled(),
		Logger:       env.Logger.Named("outbox"),
	}
	for _, name := range slices.Sorted(maps.Keys(wc.Destinations)) {
		d := wc.Destinations[name]
		dest, err := newDestination(&d)
		if err != nil {
			closeDestinations(rc)
			return nil, fmt.Errorf("worker.destinations.%s: %w", name, err)
		}
		rc.Destinations[name] = &outbox.RelayDestination{
			Destination: dest, Concurrency: d.Concurrency, Rate: d.Rate, MaxAttempts: d.MaxAttempts,
			BackoffMin: d.BackoffMin, BackoffMax: d.BackoffMax,
		}
	}
	return rc, nil
}

// newDestination builds one configured destination.
func newDestination(d *config.DestinationConfig) (outbox.Destination, error) {
	switch d.Kind {
	case config.DestinationHTTP:
		return outbox.NewHTTP(&outbox.HTTPConfig{URL: d.URL, Secret: d.Secret, Timeout: d.Timeout})
	case config.DestinationNATS:
		// TODO(lead): wire pkg/jetstream (branch natsdest) here once it is
		// merged: jetstream.New, and a Destination whose Deliver renders
		// d.Subject with jetstream.RenderSubject(d.Subject, r.Source,
		// r.EventType) and calls Publish(ctx, subject, r.Key, r.Payload,
		// r.Headers).
		return nil, fmt.Errorf("kind %q is not built into this binary yet", d.Kind)
	}
	return nil, fmt.Errorf("unknown kind %q", d.Kind)
}

// closeDestinations closes the destinations built so far that hold a
// connection.
func closeDestinations(rc *outbox.RelayConfig) {
	for _, d := range rc.Destinations {
		if c, ok := d.Destination.(interface{ Close() }); ok {
			c.Close()
		}
	}
}
