# One entry point for humans and CI. `make help` lists the targets.

GO     ?= go
BUF    := $(GO) tool -modfile=tools/buf/go.mod buf

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

.PHONY: run
run: ## run corral: one process, in memory, local dev mode, on 127.0.0.1:8080
	$(GO) run ./cmd/corral serve --insecure-dev

.PHONY: test
test: ## run the whole test suite (race detector on; fuzz seeds; benchmarks once)
	$(GO) test -race -count=1 ./...
	$(GO) test -run='^$$' -bench=. -benchtime=1x ./... > /dev/null

.PHONY: generate
generate: ## regenerate gen/ from proto/
	$(BUF) format -w
	$(BUF) generate

.PHONY: check
check: ## static checks: gofmt, go vet, buf lint/format, gen/ is current
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^gen/')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BUF) lint
	$(BUF) format --diff --exit-code
	$(BUF) generate
	@if [ -n "$$(git status --porcelain -- gen/)" ]; then \
	  echo "gen/ is stale: run 'make generate' and commit"; git status --porcelain -- gen/; exit 1; fi

.PHONY: ci
ci: check test ## what CI runs

.PHONY: fuzz
fuzz: ## fuzz every decoder of network bytes for FUZZTIME each (default 30s)
	@for pkg in ./protocol ./auth; do \
	  for f in $$($(GO) test -list='^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$${FUZZTIME:-30s} $$pkg || exit 1; \
	  done; \
	done
