// Package faults is hookinbox's fault and hostile-input suite (issue 17):
// it injects real faults (SIGKILL of a receiver or a worker, a PostgreSQL
// restart, a failover to a standby, a commit cut off before its answer,
// hostile signatures) into
// the real binaries and checks the guarantee that sums up hookinbox:
// nothing acknowledged is lost, nothing is applied twice.
//
// The scenarios are the package's tests. `make test` runs one short pass
// of each; `make faults` sets HOOKINBOX_FAULTS=full for the full sizes
// and prints one Row per scenario in a Table. Each scenario asserts its
// guarantee itself, so a broken row fails the run.
//
// Sender is the load generator: it signs deposits as a Standard Webhooks
// provider would and retries each one until it is answered 2xx, as a
// provider does after an error or no answer. It sends only to the targets
// it is given, which the tests keep on 127.0.0.1.
package faults
