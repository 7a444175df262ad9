# One entry point for humans and CI. `make help` lists the targets.

GO     ?= go
NPM    ?= npm
# buf: the prebuilt binary from npm (@bufbuild/buf, pinned in tools/buf's lock
# file), not compiled from source (4.5 min on 2 cores, silent).
BUF    := tools/buf/node_modules/.bin/buf
BUF_DEPS := tools/buf/node_modules/.package-lock.json
# helm has no prebuilt binary on a registry this project reaches: built
# from tools/helm/go.mod once, into ~/.cache/corral-tools, with a progress line every
# 20 s (the first build took 12.8 min on 2 cores, silent, under go tool).
HELM   := GO=$(GO) tools/gotool.sh helm
BUILDAH ?= buildah
IMAGE  ?= localhost/corral:dev

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

.PHONY: run
run: ## run corral: one process, in memory, local dev mode, on 127.0.0.1:8080
	$(GO) run ./cmd/corral serve --insecure-dev

.PHONY: test
test: deps test-go test-js ## run the whole test suite (installing what it needs first): Go, then the browser SDK and the demo in Chromium

# Extra WHAT=PACKAGE requirements for tools/install-deps.sh, e.g.
# `make deps DEPS=podman=podman`.
DEPS ?=

.PHONY: deps
deps: ## install what the tests need and this machine lacks: redis-server, Node.js 20+ with npm, chromium (apt-get)
	@tools/install-deps.sh $(DEPS)

.PHONY: test-go
test-go: deps ## Go tests (race detector on; fuzz seeds; benchmarks once)
	tools/progress.sh "go test -race ./..." $(GO) test -race -count=1 -timeout=25m ./...
	tools/progress.sh "benchmarks, once each" sh -c "$(GO) test -run='^$$' -bench=. -benchtime=1x ./... > /dev/null"

.PHONY: test-js
test-js: build-js test-hooks-ts test-outbox-ts ## SDK unit tests, then the demo page in headless Chromium against a real corral
	cd clients/js && $(NPM) test
	cd e2e && ../tools/progress.sh "e2e in Chromium" $(NPM) test

.PHONY: test-hooks-ts
test-hooks-ts: examples/hooks-ts/node_modules/.package-lock.json ## type-check the TypeScript hooks backend example (examples/hooks-ts) against its generated code
	cd examples/hooks-ts && $(NPM) exec -- tsc -p tsconfig.json --noEmit

.PHONY: test-outbox-ts
test-outbox-ts: examples/outbox-ts/node_modules/.package-lock.json ## type-check the TypeScript outbox chat backend (examples/outbox-ts); integration's TestOutboxTypeScriptBackend runs it
	cd examples/outbox-ts && $(NPM) exec -- tsc -p tsconfig.json --noEmit

.PHONY: build-js
build-js: js-deps ## build the browser SDK (clients/js/dist: ESM, IIFE, types) and the demo's copy (web/assets/corral.js)
	cd clients/js && $(NPM) run build

.PHONY: pack-js
pack-js: js-deps ## npm pack the browser SDK: clients/js/corral-rt-client-<version>.tgz, what npm publish uploads
	cd clients/js && $(NPM) pack

# npm ci again only when a lock file changes.
.PHONY: js-deps
js-deps: deps clients/js/node_modules/.package-lock.json e2e/node_modules/.package-lock.json

%/node_modules/.package-lock.json: %/package-lock.json %/package.json | deps
	cd $* && $(NPM) ci --no-audit --no-fund
	@touch $@

.PHONY: generate
generate: $(BUF_DEPS) ## regenerate gen/ and the JSON codec (protocol/client_json.pb.go) in Go, and clients/js/src/gen (TypeScript), from proto/
	$(BUF) format -w
	$(BUF) generate
	$(BUF) generate --template protocol/buf.gen.yaml
	$(MAKE) generate-js

.PHONY: generate-js
generate-js: clients/js/node_modules/.package-lock.json $(BUF_DEPS)
	$(BUF) generate --template clients/js/buf.gen.yaml

.PHONY: check
check: $(BUF_DEPS) ## static checks: gofmt, go vet, buf lint/format/breaking, gen/ and the JSON codec are current, the config schema and key table (docs/corral.schema.json, docs/CONFIG.md) too
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	tools/progress.sh "go vet ./..." $(GO) vet ./...
	$(BUF) lint
	$(BUF) format --diff --exit-code
	$(MAKE) --no-print-directory breaking
	tools/progress.sh "buf generate (the plugins build on first use)" $(BUF) generate
	$(BUF) generate --template protocol/buf.gen.yaml
	@if [ -n "$$(git status --porcelain -- gen/ protocol/client_json.pb.go)" ]; then \
	  echo "gen/ is stale: run 'make generate' and commit"; git status --porcelain -- gen/ protocol/client_json.pb.go; exit 1; fi
	$(GO) test -count=1 -run 'TestConfigDocsCurrent|TestConfigDocExample' ./cmd/corral

.PHONY: breaking
breaking: $(BUF_DEPS) ## buf breaking: proto/ must stay compatible with the previous commit
	@if git rev-parse --verify -q 'HEAD~1^{commit}' >/dev/null; then \
	  echo "buf breaking --against HEAD~1"; \
	  $(BUF) breaking --against '.git#ref=HEAD~1'; \
	else \
	  echo "buf breaking: skipped: no previous commit here (a single commit or a shallow clone)"; \
	fi

.PHONY: check-js
check-js: generate-js build-js ## clients/js/src/gen and the demo's SDK bundle are current
	@if [ -n "$$(git status --porcelain -- clients/js/src/gen web/assets/corral.js)" ]; then \
	  echo "clients/js/src/gen or web/assets/corral.js is stale: run 'make generate build-js' and commit"; \
	  git status --porcelain -- clients/js/src/gen web/assets/corral.js; exit 1; fi

.PHONY: ci
ci: check check-js test deploy-check release-check ## what CI runs

.PHONY: fuzz
fuzz: ## fuzz every package's Fuzz targets (every decoder of network bytes) for FUZZTIME each (default 30s)
# -fuzzminimizetime=10x: FuzzConnection drives a live server whose
# background goroutines make coverage noisy, so almost every input looks
# new; the default minimization (up to 60 s each) then took ~4 execs a
# minute instead of ~5,000.
	@for pkg in $$(grep -rl --include='*_test.go' --exclude-dir=node_modules '^func Fuzz' . | xargs -n1 dirname | sort -u); do \
	  for f in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$${FUZZTIME:-30s} -fuzzminimizetime=10x $$pkg || exit 1; \
	  done; \
	done

# ---- deploy: the binary, the container image, the Helm chart, the dashboard.

.PHONY: binary
binary: ## static binary bin/corral (CGO_ENABLED=0; what the image holds)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w $(BUILDINFO_LDFLAGS)' -o bin/corral ./cmd/corral

# The image's build context: the binary, CA certificates, passwd and group.
# Nothing is pulled (FROM scratch).
.PHONY: image
image: binary ## container image $(IMAGE) from the Dockerfile (buildah; FROM scratch, offline)
	rm -rf bin/image && mkdir -p bin/image
	cp bin/corral deploy/image/passwd deploy/image/group bin/image/
	cp /etc/ssl/certs/ca-certificates.crt bin/image/
	$(BUILDAH) build --quiet -f Dockerfile $(IMAGE_LABELS) -t $(IMAGE) bin/image

# `podman run` cannot run here (crun: setrlimit, cgroups); buildah runs the
# image's own binary in a chroot on the host's network instead.
.PHONY: image-smoke
image-smoke: image ## run the image, connect, publish, read back, SIGTERM and see the drain
	CORRAL_IMAGE=$(IMAGE) BUILDAH=$(BUILDAH) $(GO) test -count=1 -v -run '^TestImage' ./deploy/image

# The rendered manifests are validated by a Go test against the Kubernetes
# API types (tools/helm/rendered_test.go): kubectl's client-side dry run
# needs a cluster to discover the kinds.
.PHONY: helm-check
helm-check: ## helm lint + helm template of every deploy/helm/examples values file, manifests validated; DEPLOYMENT.md's Helm walkthrough run (needs kubectl, openssl)
	@rm -rf bin/helm && mkdir -p bin/helm
	@set -e; for v in deploy/helm/examples/*.yaml; do \
	  echo "== $$v"; \
	  $(HELM) lint --strict --quiet deploy/helm/corral -f $$v; \
	  $(HELM) template corral deploy/helm/corral -f $$v --namespace corral > bin/helm/$$(basename $$v); \
	done
	@set -e; for v in deploy/helm/invalid/*.yaml; do \
	  want=$$(sed -n 's/^# want: //p' $$v); \
	  if out=$$($(HELM) template corral deploy/helm/corral -f $$v 2>&1); then \
	    echo "$$v: rendered, want the error: $$want"; exit 1; fi; \
	  case "$$out" in *"$$want"*) echo "== $$v: refused as it should be";; \
	    *) echo "$$v: want the error '$$want', got: $$out"; exit 1;; esac; \
	done
	cd tools/helm && CORRAL_HELM_RENDERED=$(CURDIR)/bin/helm $(GO) test -count=1 -run '^(TestRendered|TestDeploymentHelmWalkthrough|TestConfigChangeRollsPods)' .

# grpcurl (pinned in tools/grpcurl/go.mod) lists a core's API by reflection.
.PHONY: grpcurl-check
grpcurl-check: ## grpcurl list/describe/call against a corral core, by gRPC reflection with the API key
	@echo "grpcurl-check: builds grpcurl once (about a minute on a cold cache)"
	cd tools/grpcurl && $(GO) test -count=1 .

.PHONY: deploy-check
deploy-check: helm-check image-smoke grpcurl-check ## the chart, the image and grpcurl against a core (the dashboard's test runs with the Go tests)

# ---- release: every artifact of a version in one folder, and its check.

# Set for a release (make release VERSION=x.y.z); empty, a build says
# "(devel)". The commit is stamped either way (GOFLAGS may hold
# -buildvcs=false, and a build outside git has no VCS stamp).
VERSION ?=
COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILDINFO_LDFLAGS = -X github.com/corral-rt/corral/internal/buildinfo.commit=$(COMMIT)$(if $(VERSION), -X github.com/corral-rt/corral/internal/buildinfo.version=$(VERSION))
IMAGE_LABELS = --label 'org.opencontainers.image.version=$(or $(VERSION),(devel))' \
  --label org.opencontainers.image.revision=$(COMMIT) \
  --label org.opencontainers.image.source=https://github.com/corral-rt/corral \
  --label org.opencontainers.image.licenses=Apache-2.0
# What release-check builds: a pre-release of the commit under test.
CHECK_VERSION ?= 0.0.0-check

.PHONY: release
release: ## dist/VERSION/: binaries for linux and darwin x amd64 and arm64 (tar.gz), SBOMs, the image (OCI archive), the SDK tarball, the Helm chart, SHA256SUMS
	@if [ -z "$(VERSION)" ]; then echo "usage: make release VERSION=x.y.z"; exit 2; fi
	@tools/install-deps.sh buildah=buildah /usr/sbin/update-ca-certificates=ca-certificates $(DEPS)
	VERSION=$(VERSION) GO=$(GO) NPM=$(NPM) BUILDAH=$(BUILDAH) tools/release/build.sh

.PHONY: release-check
release-check: js-deps ## build a release of this commit (VERSION 0.0.0-check) and check every artifact as a user would take it
	$(MAKE) --no-print-directory release VERSION=$(CHECK_VERSION)
	VERSION=$(CHECK_VERSION) GO=$(GO) NPM=$(NPM) BUILDAH=$(BUILDAH) tools/release/check.sh
