package config

import "strings"

// Needs names the parts of the configuration a command uses; combine them
// with |. Load demands only what needs names: ${NAME} references that must
// be set, secrets files that must be readable, values that must be valid and
// lists that must not be empty. The log section is always needed, and the
// file's shape always matters: an unknown key anywhere is an error for every
// command. The parts needs leaves out are still decoded and defaulted, but
// are neither checked nor fully expanded (an unset ${NAME} there reads as
// ""), so a command must not use them.
//
// The commands' needs:
//
//	inboxctl migrate, inboxctl stats   NeedDatabase
//	receiver                           NeedDatabase | NeedReceiver
//	worker (and worker binaries)       NeedDatabase | NeedWorker
//	inboxctl send                      NeedReceiver
//	inboxctl prune, events purge,      NeedInbox
//	replay, sources
//	inboxctl reconcile                 NeedInbox | NeedReconcile
type Needs uint8

const (
	// NeedDatabase needs database.url (required) and database.max_conns.
	NeedDatabase Needs = 1 << iota
	// NeedSources needs the sources: their ${NAME} references set, their
	// secrets files read, each one valid and its verifier buildable. A
	// command that needs sources may still have none.
	NeedSources
	// NeedReceiver needs the receiver section, worker.max_attempts (which
	// the receiver stamps on the jobs it enqueues) and the sources, of
	// which there must be at least one, but not their reconcile keys
	// (the worker reconciles).
	NeedReceiver
	// NeedWorker needs the worker section, of whose routes there must be at
	// least one, and the sources, which routes and queues refer to, but not
	// their verifier credentials (secrets, secrets_file, basic_auth,
	// hmac.api_keys), which only the receiver uses: a worker's environment
	// need not hold the signing secrets. NeedReceiver and NeedWorker both
	// need the tracing section.
	NeedWorker
	// NeedInbox needs what decides what becomes of the inbox's rows, for a
	// command that deletes or rewrites them: the sources, checked as the
	// worker checks them (a retention inside the provider's redelivery
	// window is refused: retention.Policy.Check), but not their verifier
	// credentials nor their reconcile keys; and worker.max_attempts, which
	// the jobs it enqueues carry. NeedReceiver and NeedWorker need all
	// that too.
	NeedInbox
	// NeedReconcile needs the sources' reconcile sections (their API keys
	// set and valid), for inboxctl reconcile, which runs a source's
	// reconciliation as the worker does; combine it with NeedInbox.
	// NeedWorker needs them too.
	NeedReconcile
)

// verifies reports whether n needs the sources' verifier credentials.
func (n Needs) verifies() bool { return n&(NeedSources|NeedReceiver) != 0 }

// covers reports whether key ("receiver.ack_timeout",
// "sources[stripe].secrets[0]") is in a part that n needs.
func (n Needs) covers(key string) bool {
	switch {
	case within(key, "database"):
		return n&NeedDatabase != 0
	case within(key, "receiver"):
		return n&NeedReceiver != 0
	case within(key, "sources"):
		switch rest := sourceSubkey(key); {
		case within(rest, "secrets"), within(rest, "secrets_file"), within(rest, "basic_auth"), within(rest, "hmac.api_keys"):
			return n.verifies()
		case within(rest, "reconcile"):
			return n&(NeedSources|NeedWorker|NeedReconcile) != 0
		}
		return n&(NeedSources|NeedReceiver|NeedWorker|NeedInbox) != 0
	case key == "worker.max_attempts":
		return n&(NeedReceiver|NeedWorker|NeedInbox) != 0
	case within(key, "worker"):
		return n&NeedWorker != 0
	case within(key, "tracing"):
		return n&(NeedReceiver|NeedWorker) != 0
	default:
		return true // log, and unknown top-level keys.
	}
}

// sourceSubkey is the part of a source's key after the source:
// "secrets[0]" for "sources[stripe].secrets[0]", "" for "sources[stripe]".
func sourceSubkey(key string) string {
	_, rest, ok := strings.Cut(key, "].")
	if !ok || !strings.HasPrefix(key, "sources[") {
		return ""
	}
	return rest
}
