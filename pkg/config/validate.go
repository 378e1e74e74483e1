package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/hookinbox/hookinbox/internal/receiver"
)

// The values of worker.unrouted.
const (
	// UnroutedDone marks an event no route matches as done, with a note.
	UnroutedDone = "done"
	// UnroutedFailed marks an event no route matches as failed.
	UnroutedFailed = "failed"
)

var (
	sourceNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	// River's queue name rule: letters and digits separated by _ or -.
	queueNameRE = regexp.MustCompile(`^[a-z0-9]+(?:[_-][a-z0-9]+)*$`)
)

const queueNameMaxLen = 64 // River's limit.

// Validate checks c, which should already have its defaults applied (Load
// does both). It checks every section, whatever a command needs, and demands
// no source and no route (Load does, for the commands that need them). It
// reports every problem at once, joined, each naming its key
// ("receiver.ack_timeout: must be positive"), a source by its name
// ("sources[stripe].tolerance"), or by its index when the name is missing,
// invalid or shared. Each source is also given to provider.New, so that
// what its provider requires (marqeta's basic_auth, square's url …) is
// checked at start-up and reported under the source's key
// ("sources[marqeta]: marqeta: basic_auth: …"). No message ever contains a
// secret, a password, an API key or the database URL.
func (c *Config) Validate() error {
	var p problems
	c.validate(&p)
	return p.join()
}

// validate adds c's problems to p.
func (c *Config) validate(p *problems) {
	c.validateDatabase(p)
	c.validateLog(p)
	c.validateReceiver(p)
	c.validateSources(p)
	c.validateWorker(p)
	c.validateOps(p)
	ownerProblems(p, "tracing.", c.Tracing.Validate()) // the tracing settings' own checks
}

func (c *Config) validateDatabase(p *problems) {
	if c.Database.URL == "" {
		p.addf("database.url", "required (set %s, database.url or %s)", envVar("database.url"), databaseURLEnv)
	} else if err := c.Database.URL.CheckPostgres(); err != nil {
		p.addf("database.url", "%s", err)
	}
	positive(p, "database.max_conns", c.Database.MaxConns)
	c.Database.validatePooler(p)
	ownerProblems(p, "database.durability.", c.Database.Durability.Validate()) // the durability settings' own checks
}

// logLevels are the levels a config may name.
var logLevels = []string{"debug", "info", "warn", "error"}

func (c *Config) validateLog(p *problems) {
	if !slices.Contains(logLevels, c.Log.Level) {
		p.addf("log.level", "must be debug, info, warn or error, not %q", c.Log.Level)
	}
	if !slices.Contains([]string{"json", "console"}, c.Log.Format) {
		p.addf("log.format", "must be json or console, not %q", c.Log.Format)
	}
}

func (c *Config) validateReceiver(p *problems) {
	r := &c.Receiver
	listenAddr(p, "receiver.listen", r.Listen)
	if r.OpsListen != "" {
		listenAddr(p, "receiver.ops_listen", r.OpsListen)
		if r.OpsListen == r.Listen && !strings.HasSuffix(r.Listen, ":0") {
			p.addf("receiver.ops_listen", "%q is receiver.listen too; leave it empty to serve everything there", r.OpsListen)
		}
	}
	positive(p, "receiver.max_body_bytes", r.MaxBodyBytes)
	positive(p, "receiver.ack_timeout", r.AckTimeout)
	if r.ShutdownDelay != nil && *r.ShutdownDelay < 0 {
		p.addf("receiver.shutdown_delay", "must not be negative (0s turns the delay off)")
	}
	positive(p, "receiver.shutdown_timeout", r.ShutdownTimeout)
	ownerProblems(p, "receiver.", r.Validate())                 // the group commit's own checks
	ownerProblems(p, "receiver.", receiverConfig(r).Validate()) // receiver.Config's own checks
	for _, s := range c.Sources {
		if r.MaxUnverifiedBytes > 0 && !receiver.BodyFits(s.MaxBodyBytes, r.MaxUnverifiedBytes) {
			p.addf("receiver.max_unverified_bytes", "must be at least twice sources[%s].max_body_bytes plus one (%d), so that one client's half holds a body at the limit", s.Name, 2*(s.MaxBodyBytes+1))
			break
		}
	}
}

func (c *Config) validateWorker(p *problems) {
	w := &c.Worker
	listenAddr(p, "worker.listen", w.Listen)
	positive(p, "worker.concurrency", w.Concurrency)

	if len(w.Queues) == 0 {
		p.addf("worker.queues", "at least one queue is required")
	}
	for i, queue := range w.Queues {
		key := fmt.Sprintf("worker.queues[%d]", i)
		queueName(p, key, queue)
		if first := slices.Index(w.Queues, queue); first < i {
			p.addf(key, "duplicate %q (also worker.queues[%d])", queue, first)
		}
	}

	ownerProblems(p, "worker.", w.Config.Validate()) // worker.Config's own checks
	if w.Unrouted != UnroutedDone && w.Unrouted != UnroutedFailed {
		p.addf("worker.unrouted", "must be %s or %s, not %q", UnroutedDone, UnroutedFailed, w.Unrouted)
	}
	positive(p, "worker.hard_stop_timeout", w.HardStopTimeout)
	ownerProblems(p, "worker.", w.Pace.Validate()) // the replay pace's own checks
	if w.UI.Enabled && len(w.UI.BasicAuth) == 0 {
		p.addf("worker.ui.basic_auth", "required when worker.ui.enabled is true: River UI is never served without authentication")
	}
	for j, ba := range w.UI.BasicAuth {
		baKey := fmt.Sprintf("worker.ui.basic_auth[%d]", j)
		switch {
		case ba.Username == "":
			p.addf(baKey+".username", "required")
		case strings.Contains(ba.Username, ":"):
			p.addf(baKey+".username", "must not contain ':' (HTTP Basic cannot carry it)")
		}
		if strings.TrimSpace(ba.Password.Reveal()) == "" {
			p.addf(baKey+".password", "must not be empty")
		}
	}

	c.validateOutbox(p)
	for i := range w.Routes {
		c.validateRoute(p, i)
	}
}

// validateRoute checks what worker.Config.Validate cannot: that the route's
// source exists, and what its source's provider and worker.destinations
// must give it.
func (c *Config) validateRoute(p *problems, i int) {
	route := &c.Worker.Routes[i]
	key := fmt.Sprintf("worker.routes[%d]", i)
	if _, ok := c.Source(route.Source); !ok && route.Source != "*" && route.Source != "" {
		p.addf(key+".source", "unknown source %q", route.Source)
	}
	c.validateRouteOrdering(p, key, route)
	c.validateRouteForward(p, key, route)
}

func listenAddr(p *problems, key, addr string) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.addf(key, "%q is not host:port", addr)
		return
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		p.addf(key, "%q: port must be a number from 0 to 65535", addr)
	}
}

func queueName(p *problems, key, name string) {
	switch {
	case name == "":
		p.addf(key, "required")
	case len(name) > queueNameMaxLen:
		p.addf(key, "longer than %d characters", queueNameMaxLen)
	case !queueNameRE.MatchString(name):
		p.addf(key, "%q must be lowercase letters and digits separated by _ or -", name)
	}
}

// positive checks a size, a count or a duration.
func positive[T ~int | ~int32 | ~int64](p *problems, key string, n T) {
	if n <= 0 {
		p.addf(key, "must be positive")
	}
}

// ownerProblems records the problems of an owner's Validate, each an error
// starting with its key within the owner's section ("max_attempts: must be
// positive"), under prefix+key.
func ownerProblems(p *problems, prefix string, err error) {
	if err == nil {
		return
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			ownerProblems(p, prefix, e) // An owner's join may hold a part's join.
		}
		return
	}
	key, msg, _ := strings.Cut(err.Error(), ": ")
	p.add(prefix+key, errors.New(msg))
}
