#!/usr/bin/env bash
# `make image-test` (and `make chart-test`): builds the image (scripts/image.sh),
# then runs the image test (scripts/imagetest, build tag imagetest): the
# rendered migration, receiver and worker containers in podman with host
# networking against the PostgreSQL of DATABASE_URL (a private cluster when
# it is unset), in a fresh database dropped afterwards; and a route change
# rolling out (old and new worker side by side, TestRouteChangeRollsOutInPodman).
#
# podman runs with a containers.conf of this run's own (CONTAINERS_CONF),
# never the user's: Debian's runc as the runtime (crun fails on some hosts'
# cgroup setup), cgroupfs, a file events log, and explicit nofile/nproc
# ulimits no higher than this shell's hard limits (podman's defaults can
# exceed them, and runc then fails to set the rlimits). The image is built
# and run in podman's default storage, so that the tested image is the one
# `make image` leaves behind.
#
# Where podman is not installed (.ci/run installs it as root), the image is
# not built and the Go test skips, saying why.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# Called directly, without a database: run in a private PostgreSQL cluster.
if [[ -z ${DATABASE_URL:-} ]]; then
	exec scripts/with-postgres.sh "$0" "$@"
fi
: "${GO:=go}"
: "${IMAGE:=hookinbox}"
if [[ -z ${VERSION:-} ]]; then
	VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
fi
export GO IMAGE VERSION
tag=$(tr -c 'A-Za-z0-9_.\n-' '-' <<<"$VERSION")

start=$SECONDS
if command -v podman >/dev/null; then
	ENGINE=podman scripts/image.sh
	echo "image-test: image built in $((SECONDS - start))s"

	conf_dir=$(mktemp -d)
	trap 'rm -rf "$conf_dir"' EXIT
	nofile=$(ulimit -Hn)
	nproc=$(ulimit -Hu)
	[[ $nofile == unlimited || $nofile -gt 65536 ]] && nofile=65536
	[[ $nproc == unlimited || $nproc -gt 4096 ]] && nproc=4096
	runtime=
	if command -v runc >/dev/null; then
		runtime='runtime = "runc"'
	fi
	cat >"$conf_dir/containers.conf" <<-CONF
		# Written by scripts/image-test.sh for this run only.
		[containers]
		default_ulimits = ["nofile=$nofile:$nofile", "nproc=$nproc:$nproc"]
		[engine]
		$runtime
		cgroup_manager = "cgroupfs"
		events_logger = "file"
	CONF
	export CONTAINERS_CONF=$conf_dir/containers.conf
else
	echo "image-test: podman is not installed; the image test will skip"
fi

export HOOKINBOX_TEST_IMAGE=$IMAGE:$tag HOOKINBOX_TEST_VERSION=$VERSION
"$GO" test -tags imagetest -count=1 -v -timeout 15m ./scripts/imagetest/
echo "image-test: done in $((SECONDS - start))s"
