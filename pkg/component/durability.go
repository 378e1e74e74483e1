package component

import (
	"fmt"
	"slices"
	"strings"
)

// The values of DurabilityConfig.Require, from the weakest: what a 2xx
// must survive.
const (
	// RequireNone requires nothing: the daemons start on any server.
	RequireNone = "none"
	// RequireServerCrash requires a 2xx to survive a crash of the server
	// (the machine, not only PostgreSQL): fsync and full_page_writes on.
	RequireServerCrash = "server_crash"
	// RequireServerLoss requires a 2xx to survive the loss of the server
	// too: a synchronous standby (synchronous_standby_names) on top.
	RequireServerLoss = "server_loss"
)

// requirements are DurabilityConfig.Require's values, weakest first.
var requirements = []string{RequireNone, RequireServerCrash, RequireServerLoss}

// DurabilityConfig is what the commits a 2xx rests on must wait for
// (internal/inboxstore aliases it). Its
// tagged fields are keys of the database: section's durability: map of the
// YAML configuration (pkg/config puts them there). WithDefaults applies the
// defaults stated below, Validate checks them.
type DurabilityConfig struct {
	// KeepRemoteWrite keeps synchronous_commit = remote_write, when the
	// server, the database or the role sets it, for the receiver's claim:
	// its COMMIT then waits until a synchronous standby has written the
	// WAL, not flushed it, which a failover keeps unless the standby's
	// machine crashes too. Defaults to false: the claim waits for on (the
	// standby has flushed it). off and local, which do not wait for a
	// standby at all, are always raised to on, and the other commits a
	// promise rests on (the outbox relay's claim, the operator's actions)
	// always wait for on.
	KeepRemoteWrite bool `mapstructure:"keep_remote_write"`
	// Require is what a 2xx must survive for the receiver and the worker
	// to start: none, server_crash (fsync and full_page_writes on) or
	// server_loss (a synchronous standby besides). A daemon on a server
	// that gives less logs why at error level and waits, unready,
	// checking again on the start-up schedule. Checked at start only.
	// Defaults to none.
	Require string `mapstructure:"require"`
}

// WithDefaults returns a copy of c with every zero-valued setting at its
// documented default.
func (c *DurabilityConfig) WithDefaults() *DurabilityConfig {
	out := *c
	if out.Require == "" {
		out.Require = RequireNone
	}
	return &out
}

// Validate checks a DurabilityConfig that WithDefaults filled; its error
// starts with the key ("require: …").
func (c *DurabilityConfig) Validate() error {
	if !slices.Contains(requirements, c.Require) {
		return fmt.Errorf("require: must be one of %s, not %q", strings.Join(requirements, ", "), c.Require)
	}
	return nil
}
