#!/usr/bin/env bash
# Runs README.md's "Running it" section verbatim, as a newcomer would type
# it: every sh block under that heading, in order, in one shell (the first
# block's exports serve the later ones), against a fresh PostgreSQL cluster
# of its own. It then checks that the event the blocks send was processed:
# `inboxctl stats` must say done 1. Run it through `make readme`, which
# builds nothing itself (the block does) and starts the private cluster.
#
# Every other command block in README.md (```sh, ```bash, ```shell or
# ```console) must say why it is not run, on the line just before it:
#   <!-- make readme: not run: REASON -->
# so that no command the README shows escapes this check unnoticed.
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

# Every command block outside "Running it" must carry the not-run marker.
unmarked=$(awk '/^## / { running = ($0 == "## Running it") }
	/^```/ && inblock { inblock = 0; prev = ""; next }
	/^```(sh|bash|shell|console)$/ {
		inblock = 1
		if (!running && prev !~ /^<!-- make readme: not run: [^ ].* -->$/) print NR
		next
	}
	!inblock && NF { prev = $0 }' README.md)
if [[ -n $unmarked ]]; then
	echo "readme: README.md has command blocks that are neither under '## Running it' nor marked" \
		"'<!-- make readme: not run: REASON -->' on the line before; at lines:" $unmarked >&2
	exit 1
fi

block=$(awk '/^## / { section = ($0 == "## Running it"); next }
	section && /^```sh$/ { inblock = 1; next }
	inblock && /^```$/ { inblock = 0; print ""; next }
	inblock { print }' README.md)
if [[ -z ${block//[[:space:]]/} ]]; then
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
printf 'readme: running these blocks from README.md:\n%s\n' "$block"

# The block runs in a session of its own, so that the daemons it leaves in
# the background can be stopped together.
setsid bash -euo pipefail -c "$block" &
leader=$!
stop() { kill -TERM -- "-$leader" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop EXIT
wait "$leader"

# The blocks have ended; the worker may still be processing the event.
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
