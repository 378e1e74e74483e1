// Package component declares the settings of hookinbox's internal
// components that are keys of the YAML configuration: the receiver's
// Server (ServerConfig, with its connection limits, HTTPConfig), its group
// commit (BatcherConfig), the durability a 2xx needs (DurabilityConfig),
// the rejection samples (RecorderConfig), a source's reconciliation
// (ReconcileConfig), the bulk replays' pace (Pace) and tracing
// (TracingConfig). pkg/config's sections embed them, so that every exported
// name of pkg/ names a public type; the internal packages that own the
// behaviour alias them (internal/tracing's Config is TracingConfig). Each
// setting is declared once, here, with its default in its doc comment;
// WithDefaults and Validate sit beside it where they need only its
// constants, in the owner's package otherwise (the receiver's Config,
// internal/reconcile's WithDefaults and Validate).
//
// It imports no package of hookinbox that imports it back: pkg/config
// imports pkg/worker, which imports internal/inboxstore, internal/replay
// and internal/tracing, so these types cannot be declared in pkg/config.
package component
