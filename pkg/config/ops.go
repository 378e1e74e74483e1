package config

import (
	"github.com/hookinbox/hookinbox/internal/reconcile"
	"github.com/hookinbox/hookinbox/pkg/component"
	"github.com/hookinbox/hookinbox/pkg/secret"
)

// This file holds the operations keys of issue 14's second half, kept
// together: receiver.rejections, sources[].reconcile, worker.pause_refresh
// and worker.admin.

// RejectionsConfig configures the rejection samples the receiver keeps per
// source (see package rejection; `inboxctl rejections SOURCE`).
type RejectionsConfig struct {
	// Disabled records no sample. Defaults to false: samples are kept.
	Disabled bool `mapstructure:"disabled"`
	// RecorderConfig holds the recorder's own settings (keep, sample_burst,
	// sample_every): their keys, defaults and validation are
	// pkg/component's, which internal/rejection's Recorder uses.
	component.RecorderConfig `mapstructure:",squash"`
}

// WorkerAdminConfig configures the worker's admin HTTP API at /admin/v1/
// on worker.listen.
type WorkerAdminConfig struct {
	// Token is the bearer token every admin request must carry. The API is
	// off when it is empty: never served open. Reference the environment
	// ("${HOOKINBOX_ADMIN_TOKEN}"); at least 16 bytes. Defaults to empty.
	Token secret.String `mapstructure:"token"`
}

// The defaults of the keys above.
const (
	minAdminTokenBytes = 16
)

func (c *Config) applyOpsDefaults() {
	r := &c.Receiver.Rejections
	r.RecorderConfig = *r.WithDefaults() // the recorder's own defaults
	for i := range c.Sources {
		rc := &c.Sources[i].Reconcile
		*rc = *reconcile.WithDefaults(rc, c.Sources[i].Provider) // reconcile's own defaults
	}
}

func (c *Config) validateOps(p *problems) {
	ownerProblems(p, "receiver.rejections.", c.Receiver.Rejections.Validate()) // the recorder's own checks

	keys := c.sourceKeys()
	for i := range c.Sources {
		s := &c.Sources[i]
		rc := &s.Reconcile
		key := keys[i] + ".reconcile"
		ownerProblems(p, key+".", reconcile.Validate(rc, s.Provider)) // reconcile's own checks
	}

	if t := c.Worker.Admin.Token; t != "" && len(t) < minAdminTokenBytes {
		p.addf("worker.admin.token", "must be at least %d bytes (or empty to turn the admin API off)", minAdminTokenBytes)
	}
}
