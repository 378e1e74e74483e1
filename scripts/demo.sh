#!/usr/bin/env bash
# The main job: build the binaries, then let the demo driver migrate, start
# the receiver and the ledger worker, send a burst of signed deliveries and
# print a summary. Run it through `make demo`, which provides DATABASE_URL
# (a private throwaway cluster when none is configured).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
echo "building receiver, worker, inboxctl, ledger and the demo driver into bin/"
"$GO" build -o bin/ ./cmd/... ./examples/ledger ./examples/ledger/demo
exec bin/demo --bin bin "$@"
