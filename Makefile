# sandboxd — see README.md. `make run` and `make test` are the two set-up
# commands; both work as root on a fresh Debian 12 machine.
GO        ?= go
VERSION   ?= 0.1.0
PREFIX    ?= /usr/local
# The helper reads its trust-defining config from this path only; it is
# compiled in, never taken from argv or the environment.
NSINIT_CONFIG ?= /etc/sandboxd/nsinit.json

PKG     := github.com/sandboxd/sandboxd
LDFLAGS := -X $(PKG)/nsinit.Version=$(VERSION) -X main.version=$(VERSION)
NSINIT_LDFLAGS := $(LDFLAGS) -X $(PKG)/nsinit/config.DefaultPath=$(NSINIT_CONFIG)

.PHONY: all build run install test unit integration bench load deps clean fmt vet

all: build

build: bin/sandboxd bin/sandboxctl bin/sandboxd-nsinit bin/sandboxd-exec

bin/sandboxd: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/sandboxd

bin/sandboxctl: FORCE
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $@ ./cmd/sandboxctl

# cgo (the C prelude, libseccomp), linked statically: the helper starts on
# every launch, and the dynamic loader cost it ~1.2 ms of each (make bench).
NSINIT_TAGS := netgo,osusergo
bin/sandboxd-nsinit: FORCE
	CGO_ENABLED=1 $(GO) build -trimpath -tags '$(NSINIT_TAGS)' -ldflags '$(NSINIT_LDFLAGS) -linkmode external -extldflags -static' -o $@ ./cmd/sandboxd-nsinit

bin/sandboxd-exec: nsinit/shim/sandboxd-exec.c
	@mkdir -p bin
	gcc -static -O2 -Wall -Wextra -Werror -o $@ $<

deps:
	scripts/deps.sh

install: build
	scripts/install.sh

run:
	scripts/run.sh

# Every unit and integration test. Integration tests run the real supervisor
# as a real non-root user against the real helper with real file
# capabilities; they need root to set that up and fail (never skip) under CI=true.
test: deps build vet
	$(GO) test -count=1 -timeout 20m ./...

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /integration)

integration: build
	$(GO) test -count=1 -v -timeout 20m ./integration/...

vet:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo "gofmt needed"; exit 1; }

bench: deps build
	$(GO) test -tags bench -count=1 -run '^TestBench$$' -v -timeout 30m ./integration/

# 10,000 one-shot execs at concurrency 4 (or as many as fit in 15 minutes),
# then every leakable resource compared with its baseline.
load: deps build
	$(GO) test -tags load -count=1 -run '^TestLoad$$' -v -timeout 40m ./integration/

clean:
	rm -rf bin

FORCE:
