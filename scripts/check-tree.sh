#!/usr/bin/env bash
# Fails when git tracks something built or big, naming each offender:
#   - a compiled binary (ELF, Mach-O, PE or WebAssembly magic bytes);
#   - a file with the executable bit that does not start with "#!";
#   - a file over MAX_FILE_BYTES (1 MiB by default).
# It reads the index (what a commit would hold), not the working tree.
# `make lint` runs it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# An export without git history (a tarball) tracks nothing: say so, loudly.
if ! top=$(git rev-parse --show-toplevel 2>&1); then
	echo "check-tree: skipped, not a git work tree: $top" >&2
	exit 0
fi
cd "$top"

max=${MAX_FILE_BYTES:-1048576}
bad=0

offend() {
	printf 'check-tree: %s: %s\n' "$1" "$2" >&2
	bad=$((bad + 1))
}

# git ls-files -s: "<mode> <object> <stage>\t<path>", NUL-terminated with -z.
while IFS= read -r -d '' entry; do
	path=${entry#*$'\t'}
	read -r mode oid _ <<<"${entry%%$'\t'*}"
	case $mode in
	120000 | 160000) continue ;; # a symlink or a submodule: no content here
	esac

	size=$(git cat-file -s "$oid")
	if ((size > max)); then
		offend "$path" "$size bytes, over the $max-byte limit"
	fi

	# The first four bytes, as hex. cat-file may die of SIGPIPE on a big blob.
	magic=$({ git cat-file blob "$oid" || true; } | head -c 4 | od -An -tx1 | tr -d ' \n')
	kind=
	case $magic in
	7f454c46) kind=ELF ;;
	feedface | feedfacf | cefaedfe | cffaedfe | cafebabe) kind=Mach-O ;;
	0061736d) kind=WebAssembly ;;
	4d5a*) kind=PE ;;
	esac
	if [[ -n $kind ]]; then
		offend "$path" "a compiled $kind binary; build into bin/ (ignored), never into git"
	elif [[ $mode == 100755 && $magic != 2321* ]]; then
		offend "$path" "executable bit without a #! line; chmod -x it (git update-index --chmod=-x)"
	fi
done < <(git ls-files -z -s)

if ((bad > 0)); then
	echo "check-tree: $bad offending file(s)" >&2
	exit 1
fi
echo "check-tree: ok ($(git ls-files | wc -l | tr -d ' ') tracked files)"
