package config

import (
	"cmp"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hookinbox/hookinbox/internal/jetstream"
	"github.com/hookinbox/hookinbox/internal/relay"
	"github.com/hookinbox/hookinbox/pkg/secret"
	"github.com/hookinbox/hookinbox/pkg/worker"
)

// The kinds of destination.
const (
	// DestinationHTTP POSTs each message, signed per Standard Webhooks.
	DestinationHTTP = "http"
	// DestinationNATS publishes each message to a NATS JetStream stream.
	DestinationNATS = "nats"
)

// OutboxConfig configures the outbox relay that runs inside each worker.
type OutboxConfig struct {
	// Relay configures the relay.
	Relay OutboxRelayConfig `mapstructure:"relay"`
}

// OutboxRelayConfig configures the relay (internal/relay). Behind a transaction
// pooler (database.pooler: transaction) it polls: a LISTEN needs a session.
type OutboxRelayConfig struct {
	// Disabled turns the relay off in this worker (another deployment
	// delivers). Defaults to false: every worker replica with destinations
	// runs a relay, and the replicas share the work.
	Disabled bool `mapstructure:"disabled"`
	// Config holds the relay's own settings (batch, lease, poll_interval):
	// their keys, defaults and validation are internal/relay's.
	relay.Config `mapstructure:",squash"`
}

// DestinationConfig is one place the forward handler (and handlers calling
// outbox.Enqueue) send messages to.
type DestinationConfig struct {
	// Kind is http or nats. Required.
	Kind string `mapstructure:"kind"`
	// URL is, for http, the absolute http(s) URL each message is POSTed
	// to; for nats, the NATS server's URL ("nats://127.0.0.1:4222").
	// Required.
	URL secret.URL `mapstructure:"url"`
	// Secret (http) signs each POST per Standard Webhooks: "whsec_" and
	// the base64 key. Reference the environment ("${BILLING_SECRET}").
	// Defaults to none: unsigned.
	Secret secret.String `mapstructure:"secret"`
	// Timeout bounds one delivery (http: the request; nats: the wait for
	// the publish ack). Defaults to 10s.
	Timeout time.Duration `mapstructure:"timeout"`
	// DestinationConfig holds the delivery policy (concurrency, rate,
	// max_attempts, backoff_min, backoff_max): its keys, defaults and
	// validation are internal/relay's.
	relay.DestinationConfig `mapstructure:",squash"`
	// Stream (nats) is the JetStream stream the subjects belong to.
	// Required for nats.
	Stream string `mapstructure:"stream"`
	// Subject (nats) is the subject template: {source} and {type} stand
	// for the event's ("stripe.{type}"). Required for nats.
	Subject string `mapstructure:"subject"`
	// Subjects (nats) are the stream's subjects, for CreateStream
	// ("stripe.>").
	Subjects []string `mapstructure:"subjects"`
	// CreateStream (nats) creates Stream over Subjects when it is missing.
	// Defaults to false.
	CreateStream bool `mapstructure:"create_stream"`
}

// The relay's and destinations' defaults are internal/relay's.
const defaultDestinationTimeout = relay.HTTPTimeoutDefault

var destinationNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// applyOutboxDefaults fills the relay's and the destinations' defaults.
func applyOutboxDefaults(w *WorkerConfig) {
	w.Outbox.Relay.Config = *w.Outbox.Relay.WithDefaults() // the relay's own defaults
	for name, d := range w.Destinations {
		d.Timeout = cmp.Or(d.Timeout, defaultDestinationTimeout)
		d.DestinationConfig = *d.WithDefaults() // the relay's own defaults
		w.Destinations[name] = d
	}
}

// validateOutbox checks worker.outbox and worker.destinations.
func (c *Config) validateOutbox(p *problems) {
	w := &c.Worker
	ownerProblems(p, "worker.outbox.relay.", w.Outbox.Relay.Validate()) // the relay's own checks
	for _, name := range slices.Sorted(maps.Keys(w.Destinations)) {
		d := w.Destinations[name]
		key := "worker.destinations." + name
		if !destinationNameRE.MatchString(name) {
			p.addf(key, "a destination name must match %s", destinationNameRE)
		}
		switch d.Kind {
		case DestinationHTTP:
			if u, err := url.Parse(d.URL.Reveal()); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				p.addf(key+".url", "must be an absolute http:// or https:// URL")
			}
			if d.Secret != "" {
				if _, err := relay.NewHTTP(&relay.HTTPConfig{URL: "http://check", Secret: d.Secret}); err != nil {
					p.addf(key+".secret", `must be "whsec_" followed by a base64 key`)
				}
			}
		case DestinationNATS:
			if d.URL == "" {
				p.addf(key+".url", "required (the NATS server, nats://host:4222)")
			}
			if d.Stream == "" {
				p.addf(key+".stream", "required for kind nats")
			}
			if d.Subject == "" {
				p.addf(key+".subject", `required for kind nats (a template such as "stripe.{type}")`)
			} else if err := jetstream.CheckTemplate(d.Subject); err != nil {
				p.addf(key+".subject", "%s", err)
			}
			if d.CreateStream && len(d.Subjects) == 0 {
				p.addf(key+".subjects", "required with create_stream (the stream's subjects, such as \"stripe.>\")")
			}
		default:
			p.addf(key+".kind", "must be %s or %s, not %q", DestinationHTTP, DestinationNATS, d.Kind)
		}
		positive(p, key+".timeout", d.Timeout)
		ownerProblems(p, key+".", d.Validate()) // the relay's own checks
	}
}

// validateRouteForward checks that a route's destinations are among
// worker.destinations.
func (c *Config) validateRouteForward(p *problems, key string, route *worker.Route) {
	for i, d := range route.Destinations {
		if _, ok := c.Worker.Destinations[d]; !ok {
			p.addf(fmt.Sprintf("%s.destinations[%d]", key, i), "unknown destination %q (worker.destinations: %s)",
				d, strings.Join(slices.Sorted(maps.Keys(c.Worker.Destinations)), ", "))
		}
	}
}
