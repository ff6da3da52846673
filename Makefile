# Flint development tasks. "make run" starts everything for local development;
# "make test" runs the checks CI runs. Needs bash, Go and (for services) Debian.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := build

GO ?= go
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# The release build: a static binary (cgo off, so it needs no libc), the time
# zone database embedded (cron series in any zone whatever the host has),
# source paths trimmed, symbols stripped. make release, the Dockerfile and
# the end-to-end tests' release binary (internal/e2e, TestReleaseBinary)
# build with exactly these; a test holds the three equal.
RELEASE_ENV := CGO_ENABLED=0
RELEASE_FLAGS := -trimpath -tags timetzdata
RELEASE_LDFLAGS := -s -w
RELEASE_PLATFORMS ?= linux/amd64 linux/arm64

# Services used by tests; override on the command line or in the environment.
TEST_DATABASE_URL ?= postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable
TEST_REDIS_URL ?= redis://127.0.0.1:6379/0
TEST_SMTP_URL ?= smtp://127.0.0.1:1025
TEST_MAILPIT_URL ?= http://127.0.0.1:8025
TEST_PGBOUNCER_URL ?= postgres://postgres@127.0.0.1:6432/postgres?sslmode=disable
export TEST_DATABASE_URL TEST_REDIS_URL TEST_SMTP_URL TEST_MAILPIT_URL TEST_PGBOUNCER_URL

BENCH ?= .
BENCHPKG ?= ./...

# Go sources to format-check: tracked and new (not ignored) files that exist,
# without generated templ output. Falls back to find outside a git checkout.
GOFILES = $(wildcard $(shell { git ls-files --cached --others --exclude-standard '*.go' 2>/dev/null \
	|| find . \( -path ./.git -o -path ./.flint -o -path ./bin \) -prune -o -name '*.go' -print; } \
	| grep -v '_templ\.go$$' | sort -u))

# Loads the development secrets made by scripts/dev-env.sh.
DEV_ENV := set -a; . .flint/dev.env; set +a

.PHONY: test-stress release release-build tidy-check lint lint-api templ-check run build test bench bench-compare bench-python bench-typescript soak chaos migrate fmt fmt-check vet clean services test-services dev-env env

run: services dev-env build
	@$(DEV_ENV); \
	key="$$FLINT_API_KEY"; \
	echo; \
	echo "  Flint (development)"; \
	echo "  Dashboard:    http://localhost:8080"; \
	echo "  Sign in as:   $$FLINT_ADMIN_EMAIL / $$FLINT_ADMIN_PASSWORD"; \
	echo "  API:          http://localhost:8080/api/v1  (docs: /api/v1/docs)"; \
	echo "  API key:      $$key"; \
	echo "  Mail catcher: http://localhost:8025"; \
	echo "  First job:"; \
	echo "    curl -s -X POST http://localhost:8080/api/v1/jobs -H \"X-API-Key: $$key\" -H 'Content-Type: application/json' -d '{\"type\":\"noop\"}'"; \
	echo "  Secrets live in .flint/dev.env (delete it for new ones). Ctrl-C stops Flint."; \
	echo; \
	LOG_FORMAT="$${LOG_FORMAT:-text}" exec bin/flint serve

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/flint .

# test-stress runs the suite STRESS_RUNS times (default 1) with stress-ng
# keeping every CPU busy beside it, as a loaded CI machine would: a test
# that waits for time rather than for the event it needs fails here. Fix
# such a test at its cause (wait for the condition), not with a longer
# timeout.
STRESS_RUNS ?= 1

# TEST_PARALLEL is how many tests of one package run at once (go test's
# -parallel; its default is the number of CPUs). Most end-to-end tests
# wait on processes, browsers and timers rather than on a CPU, so more
# of them than CPUs keeps a small machine busy.
TEST_PARALLEL ?= 4
test-stress: test-services
	scripts/services.sh ensure stress-ng
	@for i in $$(seq $(STRESS_RUNS)); do \
		echo "test-stress: run $$i of $(STRESS_RUNS), beside stress-ng --cpu $$(nproc)"; \
		stress-ng --cpu "$$(nproc)" --timeout 0 --quiet & hog=$$!; \
		if ! $(GO) test -race -count=1 -parallel $(TEST_PARALLEL) -timeout 45m ./...; then kill $$hog; wait $$hog 2>/dev/null || true; echo "test-stress: run $$i failed"; exit 1; fi; \
		kill $$hog; wait $$hog 2>/dev/null || true; \
	done; echo "test-stress: $(STRESS_RUNS) run(s) passed"

# release cuts a release (see scripts/release.sh): make release VERSION=v0.2.0
release:
	scripts/release.sh "$(VERSION)"

# release-build builds the release binaries for RELEASE_PLATFORMS into dist/.
release-build:
	@rm -rf dist && mkdir -p dist
	@for p in $(RELEASE_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; out=dist/flint-$(VERSION)-$$os-$$arch; \
		echo "build $$out"; \
		$(RELEASE_ENV) GOOS=$$os GOARCH=$$arch $(GO) build $(RELEASE_FLAGS) -ldflags "$(RELEASE_LDFLAGS) -X main.version=$(VERSION)" -o $$out .; \
	done
	@cd dist && sha256sum flint-* >SHA256SUMS && cat SHA256SUMS

test: test-services vet fmt-check templ-check tidy-check lint
	$(GO) test -race -count=1 -parallel $(TEST_PARALLEL) -timeout 30m ./...
	@# Without the services (-short, variables unset) every test that needs
	@# them skips and the rest still pass; the binaries are the ones above.
	env -u TEST_DATABASE_URL -u TEST_REDIS_URL -u TEST_SMTP_URL -u TEST_MAILPIT_URL -u TEST_PGBOUNCER_URL \
		$(GO) test -race -short -count=1 ./...

bench: services
	$(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -benchtime $${BENCHTIME:-1s} -timeout 60m $(BENCHPKG)

# Flint against River v0.51.2 (bench/riverbench, its own module) on the
# same PostgreSQL server in one run, with Asynq v0.26.0 (bench/asynqbench)
# beside it: drain, single and batch enqueue over HTTP, pickup latency;
# and durable steps, sleeps and signals against DBOS Transact Go v1.9.0
# (../shared/peers/dbosbench, when present); one table of rates and
# ratios. Settings: scripts/bench-compare.sh.
bench-compare: services
	scripts/bench-compare.sh

# Two processes of the reference Python worker (clients/python) against the
# in-process pool, 20,000 jobs each on one flint serve and one PostgreSQL,
# and the Python worker's idle pickup latency; needs python3.
bench-python: services
	$(GO) test -run '^$$' -bench 'PythonWorkers' -benchtime $${BENCHTIME:-2x} -timeout 30m ./internal/e2e/

# Two processes of the TypeScript worker (clients/typescript) against two
# of the Python worker, 20,000 jobs each, same settings, one flint serve;
# needs node (20 or later) and python3.
bench-typescript: services
	$(GO) test -run '^$$' -bench 'TypeScriptWorkers' -benchtime $${BENCHTIME:-4x} -timeout 30m ./internal/e2e/

# Long-running tests live behind the "soak" build tag. TestSoakFaults: for
# SOAK_DURATION (2 minutes unless set) Flint's APIs, schedulers and workers
# on a Patroni cluster with Redis, under enqueues at half the drain rate
# measured at the start (or SOAK_RATE jobs/s), with kills of every role,
# Patroni failovers and switchovers, Redis losses, network partitions and
# a REPEATABLE READ transaction held ten minutes at a time, all mixed; it
# prints the jobs, the faults by kind, lost / doubled / open and the pickup
# latency. SOAK=TestSoakChaos runs the older, plainer soak (one PostgreSQL,
# worker kills).
SOAK ?= TestSoakFaults
SOAK_DURATION ?= 2m
soak: services
	scripts/services.sh ensure postgres-server
	scripts/services.sh ensure patroni
	SOAK_DURATION=$(SOAK_DURATION) $(GO) test -race -count=1 -run '$(SOAK)' -tags soak -timeout 150m -v ./internal/e2e/ \
		| grep --line-buffered -v '^{'

# Failover and switchover back and forth on a primary with a synchronous
# standby (built by the test from the PostgreSQL binaries) under load, for
# CHAOS_DURATION; then the same length of Patroni (etcd and two members,
# synchronous mode) failing over after crashes of the leader's PostgreSQL
# and of its whole node, and switching over with patronictl. Each prints
# the lost / doubled / open counts and how long /readyz took to come back
# after each promotion. Then partitions of CHAOS_PARTITION each (3 minutes
# unless set), swallowing and stalling in turn, between PostgreSQL and one
# half of Flint (an API, a scheduler, a worker) for CHAOS_DURATION, the
# cut-off half recovering alone after each.
CHAOS_DURATION ?= 5m
CHAOS_PARTITION ?= 3m
chaos: services
	scripts/services.sh ensure postgres-server
	$(GO) build -modfile=tools/jaeger/go.mod -o .flint/tools/jaeger github.com/jaegertracing/jaeger/cmd/jaeger
	scripts/services.sh ensure patroni
	FLINT_CHAOS_DURATION=$(CHAOS_DURATION) FLINT_CHAOS_PARTITION=$(CHAOS_PARTITION) $(GO) test -count=1 -run 'TestChaosFailovers|TestChaosPatroni|TestChaosPartition|TestRollingUpgrade' -tags chaos -timeout 90m -v ./internal/e2e/ \
		| grep --line-buffered -v '^{'

migrate: dev-env build
	scripts/services.sh ensure postgres
	@$(DEV_ENV); bin/flint migrate

fmt:
	gofmt -w $(GOFILES) </dev/null

fmt-check:
	@out="$$(gofmt -l $(GOFILES) </dev/null)"; \
	if [ -n "$$out" ]; then echo "gofmt wants to change these files (run make fmt):"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet ./...

# golangci-lint (.golangci.yml), pinned in tools/go.mod apart from Flint's
# own dependencies; the first run builds it (a few minutes).
# tidy-check fails when go mod tidy would change go.mod or go.sum, Flint's
# or an example's (a module imported directly but marked indirect, one no
# longer needed).
tidy-check:
	@for d in . examples/*/; do \
		(cd $$d && $(GO) mod tidy -diff >/dev/null 2>&1) || { echo "go mod tidy would change $$d/go.mod or go.sum:"; (cd $$d && $(GO) mod tidy -diff); exit 1; }; \
	done

lint:
	$(GO) tool -modfile=tools/go.mod golangci-lint run ./...

# The OpenAPI document against Redocly's recommended rules (deliberate
# exceptions, with reasons, in .redocly.lint-ignore.yaml). Needs npm.
REDOCLY_VERSION := 2.77.0
lint-api:
	npm install --prefix .flint/tools --no-audit --no-fund --loglevel=error @redocly/cli@$(REDOCLY_VERSION) >/dev/null
	.flint/tools/node_modules/.bin/redocly lint internal/handlers/openapi.json --format=summary

# The committed templ output must be what the committed templates generate.
templ-check:
	@tmp="$$(mktemp -d)"; trap 'rm -rf "$$tmp"' EXIT; \
	templ="$$($(GO) tool -n templ)"; mkdir -p "$$tmp/internal/views"; cp internal/views/*.templ "$$tmp/internal/views/"; cp go.mod "$$tmp/"; \
	(cd "$$tmp" && "$$templ" generate >/dev/null 2>&1 </dev/null); \
	stale=; for f in internal/views/*.templ; do \
		g="$${f%.templ}_templ.go"; \
		cmp -s "$$g" "$$tmp/$$g" || stale="$$stale $$g"; \
	done; \
	if [ -n "$$stale" ]; then echo "templ output is stale (run go tool templ generate):$$stale"; exit 1; fi

clean:
	rm -rf bin

services:
	scripts/services.sh ensure all

# Tests also drive the dashboard in headless Chromium, put Caddy (the
# HTTPS proxy of compose.yaml) in front of Flint, run worker processes
# through PgBouncer in transaction-pooling mode, build a PostgreSQL
# primary and standby of their own from the server binaries, and run a
# Patroni cluster (etcd and two members) of their own.
test-services: services
	scripts/services.sh ensure chromium
	scripts/services.sh ensure caddy
	scripts/services.sh ensure pgbouncer
	scripts/services.sh ensure postgres-server
	scripts/services.sh ensure patroni

dev-env:
	@scripts/dev-env.sh

# Prints the development settings as shell exports, for the README's
# examples: eval "$$(make -s env)". DATABASE_URL is the database make run
# serves (config.go's default), which flint users needs to be told.
DEV_DATABASE_URL := postgres://postgres@127.0.0.1:5432/flint?sslmode=disable
env: dev-env
	@while IFS='=' read -r k v; do \
		[[ $$k =~ ^FLINT_[A-Z_]+$$ ]] || continue; \
		printf "export %s='%s'\n" "$$k" "$$v"; \
	done <.flint/dev.env
	@printf "export DATABASE_URL='%s'\n" "$${DATABASE_URL:-$(DEV_DATABASE_URL)}"
