# timed — build, test and benchmark. Every tool the targets need is fetched
# by the targets themselves (go run with pinned versions), so a fresh clone
# on a machine with Go needs nothing installed by hand.

GO          ?= go
BIN         := bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
GOFILES      = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')

.PHONY: all build demo bench-ring test tools fmt-check vet staticcheck unit bench fuzz install clean

all: build

## build: static binaries (CGO_ENABLED=0) into bin/
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '-s -w -X main.version=$(VERSION)' -o $(BIN)/ ./cmd/...

## demo: five daemons on 127.0.0.1 with simulated clocks up to ±2 s apart;
## watch the election and the clocks converge (Ctrl-C, or DURATION=60s)
DURATION ?= 0
demo: build
	$(GO) run ./deploy/demo -bin $(BIN) -duration $(DURATION)

## test: formatting, vet, staticcheck, and every test under the race detector
test: tools fmt-check vet staticcheck unit

## tools: what the tests need beyond Go, installed from Debian's packages
## where missing (systemd-analyze verifies the unit file)
tools:
	@command -v systemd-analyze >/dev/null || { \
		echo "installing systemd (for systemd-analyze)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null; }

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

## bench-ring: ring-election messages, bits and time against each paper's
## bound for n = 2^3 … 2^16, and bench-ring.png (messages/(n log2 n) vs n)
bench-ring:
	$(GO) run ./cmd/bench-ring -png bench-ring.png

## fuzz: run every decoder fuzzer for FUZZTIME each (default 3m)
FUZZTIME ?= 3m
fuzz:
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshalExt$$' -fuzztime $(FUZZTIME)
	$(GO) test ./clocksync -run '^$$' -fuzz '^FuzzProbeUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./election/ring -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)

## install: binaries, unit, sysusers entry and an example config
PREFIX  ?= /usr/local
DESTDIR ?=
UNITDIR ?= /lib/systemd/system
install: build
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)/usr/lib/sysusers.d $(DESTDIR)/etc/timed
	install -m 0755 $(BIN)/timed $(DESTDIR)$(PREFIX)/sbin/timed
	install -m 0755 $(BIN)/timedc $(DESTDIR)$(PREFIX)/bin/timedc
	sed 's#/usr/local/sbin/timed#$(PREFIX)/sbin/timed#' systemd/timed.service > $(DESTDIR)$(UNITDIR)/timed.service
	install -m 0644 systemd/timed.sysusers $(DESTDIR)/usr/lib/sysusers.d/timed.conf
	test -e $(DESTDIR)/etc/timed/timed.yaml || install -m 0644 systemd/timed.yaml.example $(DESTDIR)/etc/timed/timed.yaml

clean:
	rm -rf $(BIN)
