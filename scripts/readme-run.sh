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
# (Every inboxctl line of README.md and docs/ is also parsed, and run where
# it shows values, by the docs check in make test: make docs.)
#
# The block expects the PostgreSQL client defaults (PGHOST, PGPORT, PGUSER)
# to reach the server, as on a developer's machine; this script sets them
# from DATABASE_URL, the private cluster's, and then unsets DATABASE_URL so
# that the block's own export is the one used. The receiver and the worker
# the block starts in the background are stopped by the README's teardown
# block, which runs after the check; this script checks that they stopped
# and that the database is gone.
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

# The teardown block (marked on the line before it) runs last, after the
# check that the event was processed, in the same shell as the others.
teardown_marker='<!-- make readme: teardown, run after the check -->'
blocks() {
	awk -v want="$1" -v marker="$teardown_marker" '/^## / { section = ($0 == "## Running it"); next }
		section && /^```sh$/ { inblock = 1; teardown = (prev == marker); next }
		inblock && /^```$/ { inblock = 0; if (teardown == want) print ""; next }
		inblock { if (teardown == want) print; next }
		NF { prev = $0 }' README.md
}
block=$(blocks 0)
teardown=$(blocks 1)
if [[ -z ${teardown//[[:space:]]/} ]]; then
	echo "readme: no sh block marked '$teardown_marker' under '## Running it' in README.md" >&2
	exit 1
fi
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
printf 'readme: running these blocks from README.md:\n%s\n%s\n' "$block" "$teardown"

# The worker may still be processing the event when the blocks end: wait
# for `done 1` (60 s at most) before the teardown stops it.
check='
for _ in $(seq 1 300); do
	stats=$(DATABASE_URL=postgres:///hookinbox bin/inboxctl stats --config config/minimal.yaml 2>&1 || true)
	if grep -qx "done 1" <<<"$stats"; then
		printf "readme: the event was processed:\n%s\n" "$stats"
		break
	fi
	sleep 0.2
done
if ! grep -qx "done 1" <<<"$stats"; then
	printf "readme: the event was not processed within 60 s; stats said:\n%s\n" "$stats" >&2
	exit 1
fi
'

# The blocks run in a session of their own, so that the daemons they leave
# in the background can be stopped together if the teardown does not.
setsid bash -euo pipefail -c "$block
$check
$teardown" &
leader=$!
stop() { kill -TERM -- "-$leader" 2>/dev/null || true; wait 2>/dev/null || true; }
trap stop EXIT
wait "$leader"

# The teardown must have stopped the daemons and dropped the database.
for port in 8080 8081; do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "readme: after the teardown, 127.0.0.1:$port still answers" >&2
		exit 1
	fi
done
if [[ -n $(psql -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = 'hookinbox'") ]]; then
	echo "readme: after the teardown, the database hookinbox still exists" >&2
	exit 1
fi
echo "readme: the teardown stopped the daemons and dropped the database"
