package inboxstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hookinbox/hookinbox/pkg/component"
)

// The values of DurabilityConfig.Require, from the weakest, pkg/component's.
const (
	// RequireNone requires nothing: the daemons start on any server.
	RequireNone = component.RequireNone
	// RequireServerCrash requires a 2xx to survive a crash of the server.
	RequireServerCrash = component.RequireServerCrash
	// RequireServerLoss requires a 2xx to survive the loss of the server.
	RequireServerLoss = component.RequireServerLoss
)

// requirements are DurabilityConfig.Require's values, weakest first.
var requirements = []string{RequireNone, RequireServerCrash, RequireServerLoss}

// DurabilityConfig is what the commits a 2xx rests on must wait for,
// declared in pkg/component so that pkg/config names a public type.
type DurabilityConfig = component.DurabilityConfig

// Durability is what a commit the receiver answers 2xx after (the claim)
// survives on the server a pool reaches, as ReadDurability reads it.
type Durability struct {
	// Version is the server's version (server_version).
	Version string
	// Fsync and FullPageWrites are the server's settings (on or off).
	Fsync, FullPageWrites string
	// Session is the synchronous_commit a new session gets (from the
	// server, the database or the role).
	Session string
	// Claim is the synchronous_commit the claim commits at (ClaimLevel).
	Claim string
	// Standbys is synchronous_standby_names; empty: no synchronous standby.
	Standbys string
	// Streaming counts the synchronous standbys streaming now (sync_state
	// sync or quorum); -1 when pg_stat_replication cannot be read (the
	// role is neither a superuser nor a member of pg_monitor).
	Streaming int
}

// ReadDurability reads db's server settings that decide what a 2xx
// survives; keepRemoteWrite is DurabilityConfig.KeepRemoteWrite.
func ReadDurability(ctx context.Context, db DBTX, keepRemoteWrite bool) (*Durability, error) {
	d := &Durability{}
	// pg_stat_replication shows a role without the privilege its rows, but
	// not their state: the count is then unknown.
	err := db.QueryRow(ctx, `
SELECT current_setting('server_version'), current_setting('fsync'), current_setting('full_page_writes'), current_setting('synchronous_commit'),
       current_setting('synchronous_standby_names'),
       CASE WHEN bool_or(state IS NULL) THEN -1
            ELSE count(*) FILTER (WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')) END
FROM pg_stat_replication`).Scan(&d.Version, &d.Fsync, &d.FullPageWrites, &d.Session, &d.Standbys, &d.Streaming)
	if err != nil {
		return nil, fmt.Errorf("inbox: read the server's durability settings: %w", err)
	}
	d.Claim = ClaimLevel(d.Session, keepRemoteWrite)
	return d, nil
}

// Verdict says whether a 2xx survives a failure, and why not.
type Verdict struct {
	// Failure is the failure: process_crash, server_crash or server_loss.
	Failure string
	// What says it in words: "a process crash", "a server crash", "the
	// loss of this server".
	What string
	// Survives is whether a 2xx survives it.
	Survives bool
	// Why qualifies the answer ("no synchronous standby"); may be empty.
	Why string
}

// String is "yes", "no", with the reason in parentheses when there is one.
func (v Verdict) String() string {
	s := "no"
	if v.Survives {
		s = "yes"
	}
	if v.Why != "" {
		s += " (" + v.Why + ")"
	}
	return s
}

// Verdicts says what a 2xx survives: a crash of a process (hookinbox's or
// PostgreSQL's), a crash of the server's machine, and the loss of the
// server (its disk, or a failover to its standby).
func (d *Durability) Verdicts() []Verdict {
	process := Verdict{Failure: "process_crash", What: "a process crash", Survives: true}
	crash := Verdict{Failure: "server_crash", What: "a server crash", Survives: d.Fsync == "on" && d.FullPageWrites == "on"}
	switch {
	case d.Fsync != "on":
		crash.Why = "fsync is off"
	case d.FullPageWrites != "on":
		crash.Why = "full_page_writes is off"
	}
	loss := Verdict{Failure: "server_loss", What: "the loss of this server", Survives: d.Standbys != ""}
	switch {
	case d.Standbys == "":
		loss.Why = "no synchronous standby"
	case d.Claim == "remote_write":
		loss.Why = "the standby has written the WAL, not flushed it: not if its machine crashes too"
	}
	return []Verdict{process, crash, loss}
}

// String is the line that tells an operator what a 2xx survives: "a 2xx
// survives a process crash: yes, a server crash: yes, the loss of this
// server: no (no synchronous standby)".
func (d *Durability) String() string {
	var b strings.Builder
	b.WriteString("a 2xx survives ")
	for i, v := range d.Verdicts() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %s", v.What, v)
	}
	return b.String()
}

// StandbyState says whether a synchronous standby is configured and how
// many stream now: "none", "'*', 1 streaming", "'*', none streaming (commits
// wait for one)", "'*', streaming unknown (pg_stat_replication needs
// pg_monitor)".
func (d *Durability) StandbyState() string {
	switch {
	case d.Standbys == "":
		return "none"
	case d.Streaming < 0:
		return fmt.Sprintf("%q, streaming unknown (reading pg_stat_replication needs pg_monitor)", d.Standbys)
	case d.Streaming == 0:
		return fmt.Sprintf("%q, none streaming (commits wait for one)", d.Standbys)
	default:
		return fmt.Sprintf("%q, %d streaming", d.Standbys, d.Streaming)
	}
}

// ErrDurability is Meets's error when the server gives less than the
// requirement.
var ErrDurability = errors.New("the database gives less durability than database.durability.require")

// Meets returns nil when a 2xx survives everything require names
// (DurabilityConfig.Require), and an error wrapping ErrDurability that
// says what is missing otherwise.
func (d *Durability) Meets(require string) error {
	need := slices.Index(requirements, require)
	for i, v := range d.Verdicts()[1:] {
		if i+1 <= need && !v.Survives {
			return fmt.Errorf("%w (%s): a 2xx would not survive %s: %s", ErrDurability, require, v.What, v.Why)
		}
	}
	return nil
}
