#!/usr/bin/env bash
# make chart-test: checks charts/hookinbox with Helm's own Go module (pinned
# in tools/helm/go.mod, built by the go command; the first run compiles it,
# minutes on 2 cores): `helm lint --strict` and `helm template` for every
# value set in charts/hookinbox/ci (the defaults, and each optional feature
# on), a check that HPA and KEDA together are refused, that a typo in
# config (a key the daemons do not accept) is refused, then the Go tests of
# the chart's invariants on the rendered objects (tools/helm/chart_test.go).
# Then scripts/kube-test.sh (a real API server) and scripts/image-test.sh
# (the image in podman) when they exist; they find the rendered manifests in
# $CHART_TEST_RENDERED, one file per value set.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

helm() { go tool -modfile=tools/helm/go.mod helm "$@"; }
chart=charts/hookinbox
CHART_TEST_RENDERED=$(mktemp -d)
export CHART_TEST_RENDERED
trap 'rm -rf "$CHART_TEST_RENDERED"' EXIT
start=$SECONDS

echo "chart-test: $(helm version --short 2>/dev/null || helm version)"
for values in "$chart"/ci/*-values.yaml; do
	name=$(basename "$values" -values.yaml)
	echo "== $name: helm lint --strict, helm template"
	helm lint --strict "$chart" -f "$values" >"$CHART_TEST_RENDERED/lint.log" 2>&1 || {
		cat "$CHART_TEST_RENDERED/lint.log" >&2
		exit 1
	}
	helm template hookinbox "$chart" -f "$values" >"$CHART_TEST_RENDERED/$name.yaml"
	echo "   $(grep -c '^kind:' "$CHART_TEST_RENDERED/$name.yaml") objects:" \
		"$(grep '^kind:' "$CHART_TEST_RENDERED/$name.yaml" | cut -d' ' -f2 | sort | uniq -c | tr -s ' ' | paste -sd, -)"
done

echo "== hpa-and-keda: must be refused"
if out=$(helm template hookinbox "$chart" -f "$chart/testdata/hpa-and-keda-values.yaml" 2>&1); then
	echo "chart-test: HPA and KEDA together were rendered" >&2
	exit 1
fi
echo "   refused: $(grep -m1 'autoscaling' <<<"$out")"

# values.schema.json's "config" is generated from pkg/config's structs
# (TestConfigurationDoc): a key the daemons would refuse is refused here,
# by helm template and helm lint --strict, with its path.
refused() { # WHAT WHERE HELM-ARGS...
	local what=$1 where=$2 out
	shift 2
	echo "== config typo ($what): must be refused by helm template and helm lint --strict"
	for verb in "template hookinbox" "lint --strict"; do
		# shellcheck disable=SC2086 # the verb and its arguments
		if out=$(helm $verb "$chart" "$@" 2>&1); then
			echo "chart-test: helm $verb rendered a config with $what" >&2
			exit 1
		fi
		if ! grep -qF "at '$where': additional properties '$what' not allowed" <<<"$out"; then
			printf 'chart-test: helm %s refused %s without naming it at %s:\n%s\n' "$verb" "$what" "$where" "$out" >&2
			exit 1
		fi
	done
	echo "   refused: $(grep -m1 -F "additional properties '$what'" <<<"$out")"
}
refused lisen /config/receiver -f "$chart/ci/default-values.yaml" --set config.receiver.lisen=0.0.0.0:8080
refused secret_file /config/sources/0 -f "$chart/testdata/config-typo-values.yaml"

echo "== chart invariants (tools/helm/chart_test.go)"
(cd tools/helm && go test -count=1 ./...)

for script in scripts/kube-test.sh scripts/image-test.sh; do
	if [[ -f $script ]]; then
		echo "== $script"
		bash "$script"
	else
		echo "== $script: not there, skipped"
	fi
done
echo "chart-test: passed in $((SECONDS - start))s"
