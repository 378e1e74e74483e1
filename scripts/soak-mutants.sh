#!/usr/bin/env bash
# Usage: scripts/soak-mutants.sh   (make soak-mutants; DATABASE_URL set)
#
# MUTANTS, when set, names the mutants to run (patch names without .patch,
# separated by spaces); the others are skipped.
#
# For each internal/faults/mutants/*.patch: a throwaway git worktree of HEAD
# (commit your changes first), the patch applied, then the soak
# (internal/faults TestSoak) run with each of MUTANT_SEEDS in turn, each
# schedule MUTANT_DURATION long, until one run fails. Prints one row per
# mutant: found or not, after how many seconds (of the failing run), with
# which seed, and the promise the oracle found broken. Exits non-zero when a
# mutant was not found. MUTANTS (names without .patch, space-separated)
# restricts the run to those mutants.
set -euo pipefail

GO=${GO:-go}
seeds=${MUTANT_SEEDS:-1 2 3}
duration=${MUTANT_DURATION:-40s}
only=${MUTANTS:-}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
logs=$work/logs
mkdir -p "$logs"
cleanup() {
	for wt in "$work"/wt-*; do
		[[ -d $wt ]] && git -C "$root" worktree remove --force "$wt" >/dev/null 2>&1 || true
	done
	rm -rf "$work"
}
trap cleanup EXIT

rows=()
missed=0
for patch in "$root"/internal/faults/mutants/*.patch; do
	name=$(basename "$patch" .patch)
	[[ -z $only || " $only " == *" $name "* ]] || continue
	wt=$work/wt-$name
	git -C "$root" worktree add --detach --quiet "$wt" HEAD
	git -C "$wt" apply "$patch"
	found=no after=- with=- broken=-
	for seed in $seeds; do
		log=$logs/$name-$seed.log
		echo "== $name: seed $seed, $duration" >&2
		(cd "$wt/internal/faults" && SOAK=1 SOAK_SEED=$seed SOAK_DURATION=$duration \
			$GO test -count=1 -v -run '^TestSoak$' -timeout 1h . >"$log" 2>&1) || true
		if line=$(grep -m1 '^soak: FAILED seed' "$log"); then
			found=yes with=$seed
			after=$(sed -E 's/^soak: FAILED seed [0-9]+ after ([0-9]+)s: .*/\1s/' <<<"$line")
			broken=$(sed -E 's/^[^:]*: [^:]*: //' <<<"$line" | cut -c1-100)
			break
		fi
		grep -q '^soak: PASSED seed' "$log" || { echo "soak did not run on $name (seed $seed):" >&2; tail -20 "$log" >&2; }
	done
	[[ $found == yes ]] || missed=$((missed + 1))
	rows+=("$(printf '%-40s %-5s %-6s %-5s %s' "$name" "$found" "$after" "$with" "$broken")")
	git -C "$root" worktree remove --force "$wt"
done

printf '\n%-40s %-5s %-6s %-5s %s\n' mutant found after seed "first promise broken"
printf '%s\n' "${rows[@]}"
[[ $missed == 0 ]]
