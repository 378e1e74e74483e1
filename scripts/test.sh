#!/usr/bin/env bash
# What `make test` runs (through scripts/with-postgres.sh, which provides
# DATABASE_URL): the main module's tests in two go test runs at once, then
# the bench module's. Arguments are go test flags (-race -ldflags=-w …).
#
# HEAVY (from the Makefile: the packages whose tests take tens of seconds,
# longest first) run with go test's default -p, one package per core. The
# forty-odd others take about a second each; run after them they made a
# tail of a minute with one core idle. They run beside them instead, one at
# a time, in a second go test, whose output is printed when both end.
# Before either starts, one go build of the module's library packages fills
# the build cache, so that from a cold cache the two runs do not compile the
# same dependencies at once.
#
# GORACE=atexit_sleep_ms=0: a -race binary sleeps a second before it exits,
# to report races of goroutines still running. A test that leaves a
# goroutine running fails already (goleak), and the second cost a second
# per test binary and per test subprocess built with -race.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
: "${HEAVY:=}"
export GORACE=${GORACE:-atexit_sleep_ms=0}

module=$("$GO" list -m)
heavy=()
for dir in $HEAVY; do
	heavy+=("$module/${dir#./}")
done
light=()
while read -r pkg; do
	case " ${heavy[*]} " in
	*" $pkg "*) ;;
	*) light+=("$pkg") ;;
	esac
done < <("$GO" list ./...)

race=
case " $* " in *" -race "*) race=-race ;; esac
# shellcheck disable=SC2046 # one word per package
"$GO" build $race $("$GO" list -f '{{if and .GoFiles (ne .Name "main")}}{{.ImportPath}}{{end}}' ./...)

out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$GO" test -count=1 -timeout 10m -p 1 "$@" "${light[@]}" >"$out" 2>&1 &
light_pid=$!
status=0
"$GO" test -count=1 -timeout 10m "$@" "${heavy[@]}" || status=1
wait "$light_pid" || status=1
cat "$out"
(cd bench && "$GO" test -count=1 -timeout 10m "$@" ./...) || status=1
exit "$status"
