# hookinbox — `make` lists the targets.
GO ?= go
BIN := bin
GOFMT ?= $(shell $(GO) env GOROOT)/bin/gofmt
TESTFLAGS ?= -race
FUZZTIME ?= 30s
# make faults fuzzes every target for this long, after its scenarios.
FAULTS_FUZZTIME ?= 10s
# Scenario 5 (issue 10's attacks at full size, about 3 minutes beside the
# other scenarios) runs unless FAULTS_HOSTILE=0.
FAULTS_HOSTILE ?= 1
# FAULTS_HOSTILE_SAME_ADDRESS=1 sends scenario 5's legit client from the
# attackers' address (legit must then get 99 %); FAULTS_HOSTILE_SCALE=N
# divides its attacks' connections by N.
FAULTS_HOSTILE_SAME_ADDRESS ?= 0
FAULTS_HOSTILE_SCALE ?= 1
# golangci-lint at the version pinned in tools/go.mod, built by the go command
# (the first run builds it: minutes on 2 cores; then it comes from the cache).
GOLANGCI_LINT ?= $(GO) tool -modfile=tools/go.mod golangci-lint
# deadcode (golang.org/x/tools), pinned in tools/go.mod like golangci-lint.
DEADCODE ?= $(GO) tool -modfile=tools/go.mod deadcode

# Build only the trees that exist (go errors on a missing directory).
BUILD_PKGS := $(addsuffix /...,$(addprefix ./,$(wildcard cmd examples)))

# make soak: SEED replays a schedule (random and printed when empty);
# DURATION is the schedule's length.
SEED ?=
DURATION ?= 2m
# make soak-short (CI, after make test): a fixed seed, then a random one
# (printed), each schedule this long: about 2 minutes of schedules in all.
SOAK_SHORT_SEED ?= 1
SOAK_SHORT_DURATION ?= 45s
# make soak-mutants: the seeds tried on each mutant, in turn, and the
# schedule's length for each try; MUTANTS (names, spaces between) runs only
# those.
MUTANT_SEEDS ?= 1 2 3
MUTANT_DURATION ?= 40s
MUTANTS ?=

.DEFAULT_GOAL := help
.PHONY: help build test docs demo readme bench faults soak soak-short soak-mutants fuzz lint deadcode migrate image image-test kube-test clean chart-test

help: ## list the targets
	@awk 'BEGIN { FS = ":.*## " } /^[a-z][a-z_-]*:.*## / { printf "  %-8s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)

build: ## build the commands and examples into bin/
	@if [ -z "$(BUILD_PKGS)" ]; then echo "nothing to build: no cmd/ or examples/"; exit 0; fi; \
	mkdir -p $(BIN) && $(GO) build -o $(BIN)/ $(BUILD_PKGS)

# -timeout bounds each package's test binary. The slowest package needed
# 90-206 s (internal/faults, examples/ledger, pkg/worker) in five clean-clone
# `make test -race` runs on 2 cores at load averages of 5 to 27 (b4cf388,
# 2026-12-03), pkg/worker 358 s in a warm run at load 20-30 beside
# internal/faults (2026-12-04), and pkg/worker 506-515 s in two clean-clone
# runs at load 25 (b236224, 2026-12-06); 15m is 1.7x that. A hang still
# ends the run: every test's waits are bounded well inside it.
#
# go test starts the package binaries in the order it is given them (at most
# -p at once: GOMAXPROCS, 2 here), so the longest packages go first: listed
# alphabetically, pkg/worker and pkg/daemon started last and ran alone in
# the end while the other slot sat idle. Longest first, as measured on
# 2026-12-04 (docs/development.md); ./... adds the rest once each.
TEST_FIRST := $(addprefix ./,$(wildcard internal/faults pkg/worker pkg/daemon examples/ledger internal/receiver internal/inboxstore internal/replay cmd/inboxctl internal/relay))
# Every run links a -race test binary per package (about 50 MB each);
# -ldflags=-w leaves their DWARF out, which nothing reads (stack traces and
# race reports keep file:line: they come from the runtime's own tables):
# internal/faults' link took 1.9-2.2 CPU-s instead of 2.4-3.0.
TEST_LDFLAGS ?= -w
# -trimpath: without it the compiled packages and linked test binaries in
# the build cache name the checkout's folder, so a clean clone in a new
# folder compiled and linked the whole module again (about 150 CPU-seconds
# of a warm run's 350). Stack traces name module paths instead of absolute
# ones; nothing here reads a source path at run time.
TEST_BUILDFLAGS ?= -trimpath -ldflags=$(TEST_LDFLAGS)

# GORACE=atexit_sleep_ms=0: a -race binary sleeps a second before it exits,
# to report races of goroutines still running; a test that leaves one
# running fails already (goleak), and the sleep cost a second per test
# binary and per -race subprocess.
test: ## run all tests, the bench module's too (private PostgreSQL unless DATABASE_URL is set; TESTFLAGS=-race)
	GORACE=$${GORACE:-atexit_sleep_ms=0} scripts/with-postgres.sh sh -c 'set -e; $(GO) test -count=1 $(TESTFLAGS) $(TEST_BUILDFLAGS) -timeout 15m $(TEST_FIRST) ./...; cd bench && $(GO) test -count=1 $(TESTFLAGS) $(TEST_BUILDFLAGS) -timeout 15m ./...'

# The docs check's tests (also part of make test): README.md's, docs/'s and
# the chart README's commands, metrics, alerts, config keys and links
# against the code.
DOCS_TESTS := TestDocumented[A-Za-z]*|TestLinksResolve|TestConfigPointersResolve|TestCommandBlocksRunOrSayWhy|TestPathsExist|TestMakeTargetsExist|TestNamedTestsExist
docs: ## the docs check alone (part of make test): every inboxctl line the pages show parses and runs, every metric, alert, config key, link, make target and test they name exists
	scripts/with-postgres.sh $(GO) test -count=1 -run '^($(DOCS_TESTS))$$' ./cmd/inboxctl ./internal/metrics ./pkg/config ./internal/testkit/doctest

chart-test: ## lint and render charts/hookinbox with Helm (tools/helm/go.mod) for each value set, and test its invariants
	scripts/chart-test.sh

demo: ## run the demo against PostgreSQL (private unless DATABASE_URL is set)
	scripts/with-postgres.sh scripts/demo.sh $(DEMO_FLAGS)

readme: ## run README's "Running it" block as written, in a throwaway PostgreSQL cluster
	env -u DATABASE_URL scripts/with-postgres.sh scripts/readme-run.sh

bench: ## measure throughput and latency on this machine with hookbench (the bench/ module), print one table (BENCHFLAGS=--quick for a smoke run)
	scripts/with-postgres.sh scripts/bench.sh $(BENCHFLAGS)

faults: ## the fault suite at full size (internal/faults): one row per scenario, non-zero if a guarantee broke; then every fuzz target for FAULTS_FUZZTIME
	cd internal/faults && HOOKINBOX_FAULTS=full HOOKINBOX_FAULTS_HOSTILE=$(FAULTS_HOSTILE) HOOKINBOX_FAULTS_HOSTILE_SAME_ADDRESS=$(FAULTS_HOSTILE_SAME_ADDRESS) HOOKINBOX_FAULTS_HOSTILE_SCALE=$(FAULTS_HOSTILE_SCALE) ../../scripts/with-postgres.sh $(GO) test -count=1 -timeout 30m
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FAULTS_FUZZTIME)

soak: ## the soak (internal/faults TestSoak): 2 receivers, 2 workers, a schedule of traffic, faults and pauses drawn from SEED (printed), DURATION long, then the oracle
	cd internal/faults && SOAK=1 SOAK_SEED=$(SEED) SOAK_DURATION=$(DURATION) ../../scripts/with-postgres.sh $(GO) test -count=1 -v -run '^TestSoak$$' -timeout 3h .

soak-short: ## the CI soak: seed SOAK_SHORT_SEED, then a random seed (printed), SOAK_SHORT_DURATION each; no promise rests on timing
	$(MAKE) --no-print-directory soak SEED=$(SOAK_SHORT_SEED) DURATION=$(SOAK_SHORT_DURATION)
	$(MAKE) --no-print-directory soak SEED= DURATION=$(SOAK_SHORT_DURATION)

soak-mutants: ## apply each internal/faults/mutants/*.patch in a throwaway worktree, run the soak on it (MUTANT_SEEDS, MUTANT_DURATION), print the table
	GO=$(GO) MUTANTS="$(MUTANTS)" MUTANT_SEEDS="$(MUTANT_SEEDS)" MUTANT_DURATION=$(MUTANT_DURATION) scripts/with-postgres.sh scripts/soak-mutants.sh

fuzz: ## run every Fuzz* target for FUZZTIME (default 30s) each; no database needed
	@set -e; found=; \
	for dir in $$(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -r -n1 dirname | sort -u); do \
		for f in $$($(GO) test -list '^Fuzz' $$dir | grep '^Fuzz'); do \
			found=1; echo "== $$dir $$f ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$dir; \
		done; \
	done; \
	[ -n "$$found" ] || echo "no fuzz targets found"

lint: ## the tree check (nothing built or over 1 MiB in git), gofmt, go vet, golangci-lint (.golangci.yaml), deadcode; go vet and build of the bench/ module
	scripts/check-tree.sh
	@out=$$($(GOFMT) -l .); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...
	cd bench && $(GO) vet ./... && $(GO) build -o /dev/null ./...
	$(MAKE) --no-print-directory deadcode

# An Example without "// Output:" is compiled, never run, so deadcode lists it;
# such examples (they need PostgreSQL) are documentation and are left out.
deadcode: ## functions no binary or test reaches (deadcode -test); fails on any in pkg/ or internal/
	@out=$$($(DEADCODE) -test -tags imagetest ./...) || exit 1; \
	out=$$(printf '%s\n' "$$out" | grep -vE '_test\.go:[0-9]+:[0-9]+: unreachable func: Example'); \
	if [ -n "$$out" ]; then echo "$$out"; fi; \
	if printf '%s\n' "$$out" | grep -qE '^(pkg|internal)/'; then echo "deadcode: unreachable code in pkg/ or internal/ (above)"; exit 1; fi

migrate: ## apply the database migrations (inboxctl migrate, configured by the environment)
	$(GO) run ./cmd/inboxctl migrate

image: ## build the container image hookinbox:VERSION and hookinbox:dev with podman or docker (scripts/image.sh)
	GO=$(GO) scripts/image.sh

image-test: ## build the image, then run its receiver, worker and migration in podman against PostgreSQL
	GO=$(GO) scripts/image-test.sh

kube-test: ## the chart against a real kube-apiserver + etcd + kwok built from Go modules (scripts/kube-test.sh)
	HOOKINBOX_KUBE_TEST=1 scripts/kube-test.sh

clean: ## remove bin/
	rm -rf $(BIN)
