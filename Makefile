# timed — build, test and benchmark. Every tool the targets need is fetched
# by the targets themselves (go run with pinned versions), so a fresh clone
# on a machine with Go needs nothing installed by hand.

GO          ?= go
BIN         := bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
GOFILES      = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')

.PHONY: all build demo bench-ring bench-flood test tools fmt-check vet staticcheck unit bench fuzz install clean

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

## test: formatting, vet, staticcheck, and every test under the race detector;
## then the end-to-end suite (make e2e) when a Docker engine is reachable
test: tools fmt-check vet staticcheck unit e2e-if-docker

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

## e2e: the end-to-end suite (tests/e2e, build tag e2e): the image FROM
## scratch with bin/timed and bin/timedc, one docker-compose network per
## scenario (deploy/compose), the measured figures as a table at the end.
## Needs a Docker engine and root (nsenter, iptables, tcpdump on the
## bridge). Every container and network of the run carries the label
## org.timed-project.e2e.run=$(E2E_RUN) and is removed at the end, whether
## the tests passed, failed or were interrupted.
ifndef E2E_RUN
E2E_RUN     := $(shell od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
endif
E2E_IMAGE   ?= timed-e2e:latest
E2E_TIMEOUT ?= 15m
E2E_FIGURES  = /tmp/timed-e2e-$(E2E_RUN).figures
E2E_LABEL    = org.timed-project.e2e.run=$(E2E_RUN)
e2e: build e2e-tools
	@docker info >/dev/null 2>&1 || { echo "e2e: no Docker engine reachable (docker info failed)" >&2; exit 1; }
	docker build -q -f deploy/Dockerfile -t $(E2E_IMAGE) $(BIN)
	$(GO) vet -tags e2e ./tests/e2e
	$(GO) run $(STATICCHECK) -tags e2e ./tests/e2e
	@trap '$(MAKE) --no-print-directory e2e-clean E2E_RUN=$(E2E_RUN)' EXIT; trap 'exit 130' INT TERM; \
	status=0; \
	TIMED_IMAGE=$(E2E_IMAGE) TIMED_E2E_RUN=$(E2E_RUN) TIMED_E2E_FIGURES=$(E2E_FIGURES) \
		$(GO) test -tags e2e -count=1 -v -timeout $(E2E_TIMEOUT) ./tests/e2e || status=$$?; \
	echo; echo "== e2e figures (run $(E2E_RUN)) =="; cat $(E2E_FIGURES) 2>/dev/null || echo "(none recorded)"; \
	rm -f $(E2E_FIGURES); exit $$status

## e2e-tools: tcpdump (the suite decodes TSP on the bridge with it), from
## Debian's packages where missing; nsenter and iptables must be there
e2e-tools:
	@command -v tcpdump >/dev/null || { \
		echo "installing tcpdump"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends tcpdump >/dev/null; }
	@for t in nsenter iptables docker-compose; do command -v $$t >/dev/null || { echo "e2e: $$t is missing" >&2; exit 1; }; done

## e2e-if-docker: make e2e when `docker info` succeeds, else say so
e2e-if-docker:
	@if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory e2e; \
	else echo "e2e: no Docker engine reachable (docker info failed): end-to-end suite not run"; fi

## e2e-clean E2E_RUN=…: remove whatever a run left (containers, networks)
e2e-clean:
	@ids=$$(docker ps -aq --filter label=$(E2E_LABEL)); [ -z "$$ids" ] || docker rm -f -v $$ids >/dev/null
	@ids=$$(docker network ls -q --filter label=$(E2E_LABEL)); [ -z "$$ids" ] || docker network rm $$ids >/dev/null
	@left=$$(docker ps -aq --filter label=$(E2E_LABEL))$$(docker network ls -q --filter label=$(E2E_LABEL)); \
	if [ -n "$$left" ]; then echo "e2e-clean: run $(E2E_RUN) left $$left" >&2; exit 1; fi

## bench: benchmarks, figures beside their BSD / paper anchors; then
## bench-flood
bench:
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)
	@$(MAKE) --no-print-directory bench-flood

## bench-flood: issue 11's flood (10,000 datagrams/s for 30 s from one
## outside source: random bytes, election packets, those at debug level)
## at the master of three daemons of bin/ on loopback; the master's RSS,
## CPU, timedc status latency, masters seen, log bytes and drops, beside
## the figures before the hardening. About 2 minutes; leaves nothing.
bench-flood: build
	$(GO) run ./cmd/bench-flood -bin $(BIN)

## bench-ring: ring-election messages, bits and time against each paper's
## bound for n = 2^3 … 2^16, and bench-ring.png (messages/(n log2 n) vs n)
bench-ring:
	$(GO) run ./cmd/bench-ring -png bench-ring.png

## fuzz: run every decoder fuzzer for FUZZTIME each (default 3m)
FUZZTIME ?= 3m
fuzz:
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshalExt$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp/auth -run '^$$' -fuzz '^FuzzSplit$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp/auth -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME)
	$(GO) test ./clocksync -run '^$$' -fuzz '^FuzzProbeUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./election/ring -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./election/ring/live -run '^$$' -fuzz '^FuzzReceive$$' -fuzztime $(FUZZTIME)

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
