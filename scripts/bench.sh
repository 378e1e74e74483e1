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
exec bin/hookbench --bin bin "$@"
