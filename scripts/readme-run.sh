#!/usr/bin/env bash
# Runs README.md's "Running it" block verbatim, as a newcomer would type it,
# against a fresh PostgreSQL cluster of its own, then checks that the event
# the block sends was processed: `inboxctl stats` must say done 1. Run it
# through `make readme`, which builds nothing itself (the block does) and
# starts the private cluster.
#
# The block expects the PostgreSQL client defaults (PGHOST, PGPORT, PGUSER)
# to reach the server, as on a developer's machine; this script sets them
# from DATABASE_URL, the private cluster's, and then unsets DATABASE_URL so
# that the block's own export is the one used. The receiver and the worker
# the block starts in the background are stopped when this script exits.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${DATABASE_URL:?run this through make readme (scripts/with-postgres.sh sets DATABASE_URL)}"
hostport=${DATABASE_URL#*://}
hostport=${hostport#*@}
hostport=${hostport%%/*}
export PGHOST=${hostport%%:*} PGPORT=${hostport##*:} PGUSER=postgres
unset DATABASE_URL HOOKINBOX_CONFIG HOOKINBOX_DATABASE_URL

block=$(awk '/^## Running it/ { section = 1; next }
	section && /^## / { exit }
	section && /^```sh$/ { inblock = 1; next }
	section && inblock && /^```$/ { exit }
	inblock { print }' README.md)
if [[ -z $block ]]; then
	echo "readme: no sh block under '## Running it' in README.md" >&2
	exit 1
fi
# The block's daemons listen on config/minimal.yaml's fixed ports: say so
# plainly when something else holds them, rather than talk to it.
for port in 8080 8081; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "readme: 127.0.0.1:$port is taken by another process; config/minimal.yaml's daemons need it" >&2
		exit 1
	fi
done
printf 'readme: running this block from README.md:\n%s\n\n' "$block"

# The block runs in a session of its own, so that the daemons it leaves in
# the background can be stopped together.
setsid bash -euo pipefail -c "$block" &
leader=$!
stop() { kill -TERM -- "-$leader" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop EXIT
wait "$leader"

# The block has ended; its worker may still be processing the event.
for _ in $(seq 1 300); do
	stats=$(DATABASE_URL=postgres:///hookinbox bin/inboxctl stats --config config/minimal.yaml 2>&1 || true)
	if grep -qx 'done 1' <<<"$stats"; then
		printf 'readme: the event was processed:\n%s\n' "$stats"
		exit 0
	fi
	sleep 0.2
done
printf 'readme: the event was not processed within 60 s; stats said:\n%s\n' "$stats" >&2
exit 1
