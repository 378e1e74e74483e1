#!/usr/bin/env bash
# `make image`: builds static receiver, worker and inboxctl binaries
# (CGO_ENABLED=0, -trimpath, the version stamped with -ldflags -X), assembles
# the build context bin/image/ (the binaries, CA certificates, a passwd and
# group file for user 65532) and builds Containerfile on it with podman, or
# docker when podman is missing, tagged $IMAGE:$VERSION and $IMAGE:dev.
#
# Environment: VERSION (default: git describe --tags --always --dirty),
# IMAGE (default: hookinbox), ENGINE (podman or docker; default: whichever
# is installed, podman first), CA_BUNDLE (default: the first of the usual
# system bundles), GO (default: go).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
: "${GO:=go}"
: "${IMAGE:=hookinbox}"
if [[ -z ${VERSION:-} ]]; then
	VERSION=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
fi
# An image tag allows [A-Za-z0-9_.-] only.
tag=$(tr -c 'A-Za-z0-9_.\n-' '-' <<<"$VERSION")

if [[ -z ${ENGINE:-} ]]; then
	if command -v podman >/dev/null; then
		ENGINE=podman
	elif command -v docker >/dev/null; then
		ENGINE=docker
	else
		echo "image: neither podman nor docker is installed (apt-get install podman)" >&2
		exit 1
	fi
fi

if [[ -z ${CA_BUNDLE:-} ]]; then
	for f in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt /etc/ssl/cert.pem; do
		if [[ -s $f ]]; then
			CA_BUNDLE=$f
			break
		fi
	done
fi
if [[ -z ${CA_BUNDLE:-} || ! -s $CA_BUNDLE ]]; then
	echo "image: no CA certificate bundle found; install ca-certificates or set CA_BUNDLE" >&2
	exit 1
fi

ctx=bin/image
rm -rf "$ctx"
mkdir -p "$ctx"
echo "image: building receiver, worker and inboxctl $VERSION (static) into $ctx/"
CGO_ENABLED=0 "$GO" build -trimpath \
	-ldflags "-s -w -X github.com/hookinbox/hookinbox/internal/buildinfo.version=$VERSION" \
	-o "$ctx/" ./cmd/receiver ./cmd/worker ./cmd/inboxctl
cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
echo 'nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin' >"$ctx/passwd"
echo 'nonroot:x:65532:' >"$ctx/group"
cp Containerfile "$ctx/Containerfile"

echo "image: $ENGINE build $IMAGE:$tag"
"$ENGINE" build --build-arg "VERSION=$VERSION" -f "$ctx/Containerfile" \
	-t "$IMAGE:$tag" -t "$IMAGE:dev" "$ctx"
echo "image: built $IMAGE:$tag and $IMAGE:dev"
