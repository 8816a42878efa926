# sandboxd — see README.md. `make run` and `make test` are the two set-up
# commands; both work as root on a fresh Debian 12 machine.
GO        ?= go
VERSION   ?= 0.1.0
PREFIX    ?= /usr/local
# The helper reads its trust-defining config from this path only; it is
# compiled in, never taken from argv or the environment.
NSINIT_CONFIG ?= /etc/sandboxd/nsinit.json
# The namespace-owner file (one line UID:GID of sandboxd-ns, root-owned):
# compiled into the C prelude as SBX_OWNER_PATH, read before Go starts.
NSINIT_OWNER ?= /etc/sandboxd/nsinit.owner

PKG     := github.com/sandboxd/sandboxd
LDFLAGS := -X $(PKG)/nsinit.Version=$(VERSION) -X main.version=$(VERSION)
NSINIT_LDFLAGS := $(LDFLAGS) -X $(PKG)/nsinit/config.DefaultPath=$(NSINIT_CONFIG)

.PHONY: all build run install test unit integration race lint bench load load-reduced deps deps-dev node-deps clean vet check-deploy k8s-schemas fuzz clients deps-vm vm-image vm-test vm-test-all

all: build

build: bin/sandboxd bin/sandboxctl bin/sandboxd-nsinit bin/sandboxd-exec bin/sandboxd-relay

bin/sandboxd: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/sandboxd

bin/sandboxctl: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/sandboxctl

# cgo (the C prelude, libseccomp), linked statically: the helper starts on
# every launch, and the dynamic loader cost it ~1.2 ms of each (make bench).
NSINIT_TAGS := netgo,osusergo
bin/sandboxd-nsinit: FORCE
	@case '$(NSINIT_OWNER)' in /*) ;; *) echo "NSINIT_OWNER must be an absolute path"; exit 1;; esac
	@case '$(NSINIT_OWNER)' in *[\'\"\ \\]*) echo "NSINIT_OWNER may not contain quotes, blanks or backslashes"; exit 1;; esac
	CGO_ENABLED=1 CGO_CFLAGS="-O2 -g '-DSBX_OWNER_PATH=\"$(NSINIT_OWNER)\"'" $(GO) build -trimpath -tags '$(NSINIT_TAGS)' -ldflags '$(NSINIT_LDFLAGS) -linkmode external -extldflags -static' -o $@ ./cmd/sandboxd-nsinit

bin/sandboxd-exec: nsinit/shim/sandboxd-exec.c
	@mkdir -p bin
	gcc -static -O2 -Wall -Wextra -Werror -o $@ $<

# The in-sandbox end of egress (network "egress"): static like the shim.
bin/sandboxd-relay: nsinit/shim/sandboxd-relay.c
	@mkdir -p bin
	gcc -static -O2 -Wall -Wextra -Werror -o $@ $<

# What building and running need (make run uses it): nothing for tests.
deps:
	scripts/deps.sh

# That plus what developing and testing need: golangci-lint, systemd
# (systemd-analyze), apparmor (apparmor_parser), python3-pip/-requests.
deps-dev:
	scripts/deps.sh --dev

# Test tools, built from Go modules through the module proxy: versitygw is
# the real S3 server the archive tests start (archive/archivetest).
VERSITYGW_VERSION := v1.8.0
tools: bin/tools/versitygw

bin/tools/versitygw:
	@mkdir -p bin/tools
	GOBIN=$(CURDIR)/bin/tools $(GO) install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION)

# The npm packages the tests drive sandboxd with (the official MCP SDK
# client in mcp/sdktest; the TypeScript SDK's compiler in clients/typescript;
# the E2B code interpreter SDK in e2b/sdktest), from each directory's
# lockfile. npm ci runs again only when a lockfile changed since the last
# install (a stamp beside it).
NODE_TEST_DIRS := mcp/sdktest clients/typescript e2b/sdktest
node-deps:
	@command -v npm >/dev/null || { echo "node-deps: installing npm"; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null; }
	@set -e; for d in $(NODE_TEST_DIRS); do \
	  if ! cmp -s $$d/package-lock.json $$d/node_modules/.sandboxd-lock-stamp; then \
	    echo "node-deps: npm ci in $$d"; (cd $$d && npm ci --no-audit --no-fund --loglevel=error); \
	    cp $$d/package-lock.json $$d/node_modules/.sandboxd-lock-stamp; \
	  fi; \
	done

# The SDKs (clients/): tsc builds the TypeScript SDK's dist/. The Python SDK
# needs no build step: integration/clients_test.go pip-installs it into a
# fresh venv, offline (its build backend is in the tree).
clients: node-deps
	cd clients/typescript && npm run --silent build

install: build
	scripts/install.sh

run:
	scripts/run.sh

# Every unit and integration test, the linters and the race detector.
# Integration tests run the real supervisor as a real non-root user against
# the real helper with real file capabilities; they need root to set that up
# and fail (never skip) under CI=true. `deps-dev` installs only what is missing.
test: deps-dev tools build node-deps clients vet lint race check-deploy
	$(GO) test -count=1 -timeout 40m ./...

unit: tools
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /integration)

integration: tools build node-deps clients
	$(GO) test -count=1 -v -timeout 40m ./integration/...

# golangci-lint (.golangci.yml), at the version scripts/deps.sh pins and
# installs into the Go bin directory when missing.
GOLANGCI_LINT = $(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin)/golangci-lint
lint: deps-dev
	$(GOLANGCI_LINT) run ./...

# The race detector on the packages whose tests run without root (the
# root-only launch path is covered by the integration tests instead).
# Packages not present are skipped (measured: workspace 2 min, the rest
# under 1 min together). audit's tamper tests take five minutes
# under -race and run no goroutines: only its concurrent tests run here.
RACE_PKGS := admission api apikey client mcp errdefs internal/atomicfile launch policy supervisor workspace
race:
	$(GO) test -race -count=1 $$(for p in $(RACE_PKGS); do test -d $$p && echo ./$$p; done)
	$(GO) test -race -count=1 -run 'Concurrent|Syslog|FileWriter' ./audit

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

# The launch benchmark (the table in docs/PERFORMANCE.md: bare interpreter, bare bwrap as
# root and as the service user, API one-shot cold and warm, session process
# and kernel execs, throughput at concurrency 1/2/4, the supervisor's RSS,
# the cold path's breakdown; about 6 minutes; SANDBOXD_BENCH_N runs per
# column, SANDBOXD_BENCH_LANGS=python to narrow it), then what the audit
# trail costs per exec (fdatasync at each record, at the barriers, none;
# SANDBOXD_BENCH_AUDIT_DIR picks the file system, e.g. the state
# directory's) and what each cgroup v1 operation of a launch costs. It
# also prints a session's creation to its first output, an idle kernel's
# and an idle warm sandbox's memory, execs/s per core, and the CPU of an
# exec split by process; it writes a perf CPU profile of the supervisor at
# concurrency 2 into $(BENCH_OUT) (supervisor-c2-*.perf.data, with a text
# report beside each) and ends with one BENCH_JSON line of every figure
# (docs/PERFORMANCE.md says how to read it).
BENCH_OUT ?= $(CURDIR)/bin/bench
bench: deps-dev tools build
	rm -rf $(BENCH_OUT) && mkdir -p $(BENCH_OUT)
	$(GO) test -tags bench -count=1 -run '^TestArchiveS3Figures$$' -v -timeout 10m ./integration/
	SANDBOXD_BENCH_OUT=$(BENCH_OUT) $(GO) test -tags bench -count=1 -run '^TestAuditCost$$' -v ./audit/
	SANDBOXD_BENCH_OUT=$(BENCH_OUT) $(GO) test -tags bench -count=1 -run '^TestCgroupCost$$' -v ./cgroup/
	SANDBOXD_BENCH_OUT=$(BENCH_OUT) $(GO) test -tags bench -count=1 -run '^TestBench$$' -v -timeout 30m ./integration/

# 10,000 one-shot execs at concurrency 4 (or as many as fit in 15 minutes;
# SANDBOXD_LOAD_N and SANDBOXD_LOAD_MAX change both), then every leakable
# resource compared with its baseline, the warm pool and the pre-started
# helpers counted apart once they have settled. Prints the rate, latency
# percentiles and a LOAD_JSON line.
load: deps-dev build
	$(GO) test -tags load -count=1 -run '^TestLoad$$' -v -timeout 40m ./integration/

# The same check at 1,000 execs, for a host matrix's shorter slot.
load-reduced: deps-dev build
	SANDBOXD_LOAD_N=1000 $(GO) test -tags load -count=1 -run '^TestLoad$$' -v -timeout 20m ./integration/

clean:
	rm -rf bin clients/typescript/dist

# The host matrix (vm/README.md): Debian 12 virtual machines under qemu's
# TCG, built once and cached (SANDBOXD_VM_CACHE, default
# /var/cache/sandboxd-vm), each row installing this checkout's bin/ and
# running the host-conformance suite inside. Rows a-c: the shipped systemd
# unit on cgroup v2; the same with unprivileged user namespaces off; make
# run from a root shell. vm-test-all adds row d (the Compose recipe).
# Row e, this host, is `make test`.
VM_ROWS ?= a b c
deps-vm:
	vm/deps.sh

vm-image: deps-vm
	vm/image.sh base

vm-test: deps-vm build
	@set -e; for r in $(VM_ROWS); do GO=$(GO) vm/run.sh $$r; done

vm-test-all: deps-vm build
	@set -e; for r in a b c d; do GO=$(GO) vm/run.sh $$r; done

FORCE:

# The deployment recipes (deploy/), validated offline: compose with the
# compose-spec loader, Kubernetes manifests with kubeconform against the
# vendored schemas, the systemd unit with systemd-analyze verify. The tools
# are pinned in deploy/tools/go.mod.
check-deploy: build
	GO=$(GO) deploy/check.sh

# Regenerates deploy/kubernetes/schemas from Kubernetes' OpenAPI document in
# the k8s.io/kubernetes module (from the Go module proxy).
K8S_SCHEMA_VERSION ?= v1.33.13
K8S_SCHEMA_KINDS := apps/v1/Deployment apps/v1/DaemonSet networking.k8s.io/v1/NetworkPolicy policy/v1/PodDisruptionBudget v1/Namespace
k8s-schemas:
	@json=$$($(GO) -C deploy/tools mod download -json k8s.io/kubernetes@$(K8S_SCHEMA_VERSION)) && \
	dir=$$(echo "$$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$$/\1/p') && \
	sum=$$(echo "$$json" | sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$$/\1/p') && \
	rm -f deploy/kubernetes/schemas/*.json && \
	$(GO) -C deploy/tools run ./k8sschema -swagger "$$dir/api/openapi-spec/swagger.json" -out $(CURDIR)/deploy/kubernetes/schemas \
	  -source "k8s.io/kubernetes $(K8S_SCHEMA_VERSION) (module $$sum), api/openapi-spec/swagger.json" $(K8S_SCHEMA_KINDS)

# Each fuzz target for FUZZTIME (`make test` runs their seed corpora;
# internal/layout checks that every Fuzz function of the tree is listed).
FUZZTIME ?= 30s
FUZZ_TARGETS := supervisor:FuzzExecRequest supervisor:FuzzDeriveException nsinit/spec:FuzzDecodeSpec policy:FuzzValidateWorkspacePath profiles:FuzzParse kernel/protocol:FuzzDecode workspace:FuzzValidatePath egress:FuzzParseSNI
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "fuzz: $$name in ./$$pkg for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) ./$$pkg; \
	done
