#!/usr/bin/env bash
# attack.sh: run issue 10's five attacks at full size against the real
# receiver binary, a fresh process for each, while a legit client sends a
# signed Stripe delivery every 100 ms from 127.0.0.2; print the legit
# client's success and p99, the receiver's peak RSS and its log size.
#
#   DATABASE_URL=postgres://… scripts/attack.sh [RECEIVER_BINARY]
#
# RECEIVER_BINARY defaults to bin/receiver (built first). The config uses
# only keys every version knows, so that an older binary can be measured
# with its own defaults. Traffic goes to 127.0.0.1 only. ATTACKS limits the
# rows run (e.g. ATTACKS="slow-body flood"); LEGIT_COUNT sizes the legit run.
# LEGIT_FROM=127.0.0.1 sends the legit client from the attackers' address,
# so that the receiver cannot tell it from them (a proxy it does not trust,
# a load balancer that does not pass the address, NAT). SCALE=N divides
# every attack's connections by N (SCALE=4 fits a shared 2-core machine).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${DATABASE_URL:?set DATABASE_URL to a PostgreSQL server this script may create a database on}"
: "${GO:=go}"
"$GO" build -o bin/ ./cmd/receiver ./cmd/inboxctl
(cd bench && "$GO" build -o ../bin/hookbench .)
receiver=${1:-bin/receiver}
attacks=${ATTACKS:-slow-body big-body big-header idle flood}
legit_count=${LEGIT_COUNT:-150}
legit_from=${LEGIT_FROM:-127.0.0.2}
scale=${SCALE:-1}
port=${PORT:-18080}
ulimit -n "$(ulimit -Hn)" # the attacks open up to 10,000 connections

work=$(mktemp -d)
db=hookbench_attack_$(date +%s)
base=${DATABASE_URL%%\?*}
query=${DATABASE_URL#"$base"}
[ "$query" = "$DATABASE_URL" ] && query=
dburl=${base%/*}/$db$query
psql -q "$DATABASE_URL" -c "CREATE DATABASE $db"
trap 'psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null; rm -rf "$work"' EXIT

cat >"$work/config.yaml" <<YAML
database: {url: "$dburl"}
receiver: {listen: "127.0.0.1:$port"}
sources:
  - {name: stripe, provider: stripe, secrets: [whsec_attack]}
  - {name: github, provider: github, secrets: [github_attack]}
YAML
bin/inboxctl migrate --config "$work/config.yaml" >/dev/null

# attack NAME ARGS…: a fresh receiver, the attack, the receiver's figures.
attack() {
	local name=$1 fds=$2
	shift 2
	(ulimit -n "$fds"; exec "$receiver" --config "$work/config.yaml") >"$work/$name.log" 2>&1 &
	local pid=$!
	for _ in $(seq 100); do
		curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	echo "== $name (legit from $legit_from$([ "$scale" = 1 ] || echo ", connections / $scale"))"
	bin/hookbench attack --addr "127.0.0.1:$port" --pid "$pid" --attack "$name" --legit-count "$legit_count" --legit-from "$legit_from" "$@" || true
	echo "receiver log $(($(stat -c %s "$work/$name.log") / 1024)) KiB, $(wc -l <"$work/$name.log") lines"
	kill "$pid"
	wait "$pid" || true
}

for a in $attacks; do
	case $a in
	slow-body) attack slow-body 20000 --conns $((1100 / scale)) --body 500000 --rate 10 --path /webhooks/stripe ;;
	big-body) attack big-body 20000 --conns $((64 / scale)) --body $((25 << 20)) --path /webhooks/github ;;
	big-header) attack big-header 20000 --conns $((1000 / scale)) --header $((1 << 20)) --path /webhooks/stripe ;;
	# The receiver gets a 4,096 fd limit, as in the issue's measurement.
	idle) attack idle 4096 --conns $((10000 / scale)) --path /webhooks/stripe ;;
	flood) attack flood 20000 --conns $((64 / scale)) --max-requests 1000000 --path /webhooks/stripe ;;
	*) echo "unknown attack $a" >&2; exit 2 ;;
	esac
done
