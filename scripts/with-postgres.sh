#!/usr/bin/env bash
# Usage: scripts/with-postgres.sh CMD [ARGS...]
#        scripts/with-postgres.sh --print-bindir
#
# Runs CMD with DATABASE_URL set. If DATABASE_URL is already set and non-empty,
# CMD is simply exec'ed. Otherwise a private, throwaway PostgreSQL cluster is
# created in a temporary folder, listening on a unix socket in that folder and
# on 127.0.0.1:<free port>; it is stopped and deleted when CMD exits (also on
# failure, Ctrl-C or SIGTERM). CMD's exit code is propagated. Lines in
# PG_EXTRA_CONF (e.g. "shared_preload_libraries = 'pg_stat_statements'")
# are appended to the private cluster's postgresql.conf.
#
# --print-bindir prints the folder holding initdb/pg_ctl/postgres (for Go tests
# that want to start their own cluster).
set -euo pipefail

me=hookinbox

find_bindir() {
	local p
	if p=$(command -v initdb) && command -v pg_ctl >/dev/null; then
		# Resolve symlinks (e.g. /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb)
		# so the folder also holds the matching postgres binary.
		dirname "$(readlink -f "$p")"
		return 0
	fi
	if command -v pg_config >/dev/null && p=$(pg_config --bindir 2>/dev/null) &&
		[[ -x $p/initdb && -x $p/pg_ctl ]]; then
		echo "$p"
		return 0
	fi
	p=$(find /usr/lib/postgresql -mindepth 2 -maxdepth 2 -name bin -type d 2>/dev/null | sort -V | tail -n 1)
	if [[ -n $p && -x $p/initdb && -x $p/pg_ctl ]]; then
		echo "$p"
		return 0
	fi
	return 1
}

bindir_or_die() {
	find_bindir || {
		echo "$me: PostgreSQL server binaries (initdb, pg_ctl) not found; install them with: apt-get install postgresql (or set DATABASE_URL)" >&2
		exit 1
	}
}

if [[ ${1:-} == --print-bindir ]]; then
	bindir_or_die
	exit 0
fi

if [[ $# -eq 0 ]]; then
	echo "usage: $0 CMD [ARGS...] | --print-bindir" >&2
	exit 2
fi

if [[ -n ${DATABASE_URL:-} ]]; then
	exec "$@"
fi

bindir=$(bindir_or_die)

# initdb and pg_ctl refuse to run as root: run them as the postgres user.
as_pg() {
	if [[ $EUID -eq 0 ]]; then
		(cd / && runuser -u postgres -- "$@")
	else
		"$@"
	fi
}

if [[ $EUID -eq 0 ]]; then
	if ! id -u postgres >/dev/null 2>&1; then
		echo "$me: running as root but there is no 'postgres' user to run the private PostgreSQL cluster as (create it, run as another user, or set DATABASE_URL)" >&2
		exit 1
	fi
	command -v runuser >/dev/null || {
		echo "$me: running as root but runuser (util-linux) is missing (or set DATABASE_URL)" >&2
		exit 1
	}
fi

dir=
data=
child=
started=
cleaned=

# shellcheck disable=SC2317 # cleanup and on_signal run from traps
cleanup() {
	[[ -n $cleaned ]] && return 0
	cleaned=1
	if [[ -n $started ]] && as_pg "$bindir/pg_ctl" -D "$data" -m immediate -w stop >/dev/null 2>&1; then
		echo "$me: private PostgreSQL on port $port stopped; removed $dir" >&2
	fi
	if [[ -n $dir ]]; then rm -rf -- "$dir"; fi
	return 0
}

# shellcheck disable=SC2317
on_signal() {
	local sig=$1 code=$2
	trap '' INT TERM
	if [[ -n $child ]]; then
		kill -s "$sig" "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
	cleanup
	exit "$code"
}

trap cleanup EXIT
trap 'on_signal INT 130' INT
trap 'on_signal TERM 143' TERM

make_dir() {
	local d
	d=$(mktemp -d "${1}/hookinbox-pg.XXXXXX")
	dir=$d # record immediately so the EXIT trap removes it
	if [[ $EUID -eq 0 ]]; then
		chown postgres: "$d"
		# The postgres user must be able to reach the folder (TMPDIR may be e.g. /root/tmp).
		if ! as_pg test -w "$d"; then
			rm -rf -- "$d"
			dir=
			return 1
		fi
	fi
	chmod 700 "$d"
}

make_dir "${TMPDIR:-/tmp}" || make_dir /tmp || {
	echo "$me: cannot create a temporary folder usable by the postgres user" >&2
	exit 1
}
data=$dir/data
log=$dir/postgres.log

t0=$(date +%s%N)
if ! as_pg "$bindir/initdb" -D "$data" -A trust -U postgres --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1; then
	echo "$me: initdb failed:" >&2
	cat "$dir/initdb.log" >&2
	exit 1
fi

# Throwaway cluster: trade durability for speed. max_connections is generous for parallel tests.
cat >>"$data/postgresql.conf" <<EOF

# --- added by scripts/with-postgres.sh ---
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
fsync = off
full_page_writes = off
max_connections = 300
shared_buffers = 128MB
${PG_EXTRA_CONF:-}
EOF

# Pick a port outside both 5432 and the kernel's ephemeral range; retry if it turns out to be taken.
free_port() {
	local p
	for _ in {1..50}; do
		p=$((15000 + RANDOM % 17000))
		[[ $p -eq 5432 ]] && continue
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

port=
for attempt in 1 2 3 4 5; do
	port=$(free_port) || { echo "$me: no free TCP port found" >&2; exit 1; }
	started=1 # from here on, cleanup must try to stop the server (a signal may hit pg_ctl -w)
	if as_pg "$bindir/pg_ctl" -D "$data" -l "$log" -o "-p $port" -w -t 60 start >/dev/null 2>&1; then
		break
	fi
	if [[ $attempt -lt 5 ]] && grep -q 'could not \(bind\|create\)' "$log" 2>/dev/null; then
		: >"$log"
		continue
	fi
	echo "$me: could not start the private PostgreSQL cluster; server log:" >&2
	tail -n 30 "$log" >&2 || true
	exit 1
done
t1=$(date +%s%N)

export DATABASE_URL="postgres://postgres@127.0.0.1:$port/postgres?sslmode=disable"
echo "$me: private PostgreSQL $("$bindir/postgres" -V | awk '{print $3}') started on 127.0.0.1:$port (folder $dir, $(((t1 - t0) / 1000000)) ms)" >&2

# Run CMD in the background so a SIGTERM/SIGINT sent to this script alone is handled at
# once (and forwarded); restore INT/QUIT, which bash ignores for background jobs, and keep stdin.
set +e
(
	trap - INT QUIT TERM
	exec "$@"
) <&0 &
child=$!
wait "$child"
rc=$?
child=
set -e
exit "$rc"
