# timed — build, test and benchmark. Every tool the targets need is fetched
# by the targets themselves (go run with pinned versions), so a fresh clone
# on a machine with Go needs nothing installed by hand.

GO          ?= go
BIN         := bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
GOFILES      = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')

.PHONY: all build test fmt-check vet staticcheck unit bench fuzz clean

all: build

## build: static binaries (CGO_ENABLED=0) into bin/
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w' -o $(BIN)/ ./cmd/...

## test: formatting, vet, staticcheck, and every test under the race detector
test: fmt-check vet staticcheck unit

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)

unit:
	$(GO) test -race -count=1 $(PKGS)

## bench: benchmarks, figures beside their BSD / paper anchors
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

## fuzz: run every decoder fuzzer for FUZZTIME each (default 3m)
FUZZTIME ?= 3m
fuzz:
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)

clean:
	rm -rf $(BIN)
