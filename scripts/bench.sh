#!/usr/bin/env bash
# What `make bench` runs (through scripts/with-postgres.sh, which provides
# DATABASE_URL: a private throwaway cluster when none is configured): build
# the receiver, the worker, the ledger example and the load generator
# (hookbench, the bench/ module), then let hookbench create a fresh database,
# measure, print the table and write bench/results/latest.json. Arguments go
# to hookbench (--quick, --phases a,c, …; see bin/hookbench -h).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
echo "building receiver, worker, ledger and hookbench into bin/" >&2
"$GO" build -o bin/ ./cmd/receiver ./cmd/worker ./examples/ledger
(cd bench && "$GO" build -o ../bin/hookbench .)
status=0
bin/hookbench --bin bin "$@" || status=$?
# A full run also drains sequenced backlogs (issue 26: one key's 1,000
# events, 100 keys' 10,000; target >= 100 events/s for one key), with the
# unsequenced drain of the same backlog beside each: pkg/worker's
# BenchmarkSequencing, on the same server.
case " $* " in
*" --phases"* | *" --quick"*) ;;
*)
	echo "== sequenced backlogs: go test -run '^\$' -bench Sequencing -benchtime 1x ./pkg/worker/" >&2
	"$GO" test -run '^$' -bench Sequencing -benchtime 1x ./pkg/worker/ | grep -E 'Benchmark|events/s' || status=1
	;;
esac
exit "$status"
