# timed — build, test and benchmark. Every tool the targets need is fetched
# by the targets themselves (go run with pinned versions), so a fresh clone
# on a machine with Go needs nothing installed by hand.

GO          ?= go
BIN         := bin
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2
PKGS        := ./...
GOFILES      = $(shell git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')

.PHONY: all build demo bench-ring bench-flood bench-net bench-defaults test check tools fmt-check vet staticcheck unit bench fuzz install clean man deb deb-test summary-start summary

# Recipes run under bash with pipefail: test output goes through
# testsummary, and a failing go test must fail the pipe.
SHELL       := /bin/bash
.SHELLFLAGS := -o pipefail -c

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
## the Debian package's checks (make deb-test); then the end-to-end suite
## (make e2e) when a Docker engine is reachable, the suite of real kernels
## (make e2e-vm) and the package under a real systemd (make e2e-systemd);
## at the end, a summary of what ran, what failed and what was skipped,
## and why
test: summary-start tools fmt-check vet staticcheck unit deb-test e2e-if-docker e2e-vm e2e-systemd summary

## check: the quick loop: formatting, vet, staticcheck and the unit and
## integration tests (race, -short: the flood and the larger simulations
## run shorter), without the .deb and the docker e2e suite
check: UNIT_FLAGS = -short
check: UNIT_LABEL = (race, -short)
check: summary-start fmt-check vet staticcheck unit summary

# Each stage's go test output goes through testsummary, which prints what
# go test would and appends its counts and skips to $(SUMMARY).
BUILD   ?= build
SUMMARY := $(BUILD)/test-summary.txt
TESTSUM  = $(GO) run ./internal/tools/testsummary -summary $(SUMMARY)
summary-start:
	@mkdir -p $(BUILD) && : > $(SUMMARY)
summary:
	@echo; echo "==== summary of this run ===="; cat $(SUMMARY); \
	awk '/^tests: /{p+=$$2; f+=$$4; s+=$$6} END{printf "total: %d passed, %d failed, %d skipped\n", p, f, s}' $(SUMMARY)
## tools: what the tests need beyond Go, installed from Debian's packages
## where missing (systemd-analyze verifies the unit file; dpkg-deb and
## lintian check the .deb)
tools:
	@command -v systemd-analyze >/dev/null || { \
		echo "installing systemd (for systemd-analyze)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends systemd >/dev/null; }
	@command -v lintian >/dev/null && command -v dpkg-deb >/dev/null || { \
		echo "installing lintian (for make deb-test)"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends lintian dpkg >/dev/null; }

fmt-check:
	@out=$$(gofmt -l $(GOFILES)); if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

vet:
	$(GO) vet $(PKGS)

staticcheck:
	$(GO) run $(STATICCHECK) $(PKGS)

# make check runs the unit stage with -short: the tests that scale with
# time or seeds (the flood, the replay model, the larger simulations) run
# shorter there, and in full under make test.
UNIT_FLAGS ?=
UNIT_LABEL ?= (race)
unit:
	@mkdir -p $(BUILD)
	$(GO) test -race -count=1 $(UNIT_FLAGS) -json $(PKGS) 2>&1 | $(TESTSUM) -label "unit and integration tests $(UNIT_LABEL)"

## e2e: the end-to-end suite (tests/e2e, build tag e2e): the image FROM
## scratch with bin/timed and bin/timedc, one docker-compose network per
## scenario (deploy/compose), the measured figures as a table at the end.
## Needs a Docker engine and root (nsenter, iptables, tcpdump on the
## bridge). Every container and network of the run carries the label
## org.timed-project.e2e.run=$(E2E_RUN) and is removed at the end, whether
## the tests passed, failed or were interrupted. The attacker of the
## attack scenario, tests/e2e/attacker, is built into $(BIN)/tsp-attack and
## bind-mounted into its container: it is not part of the image.
## E2E_TAGS are the run's build tags (default e2e), vet's and staticcheck's too.
ifndef E2E_RUN
E2E_RUN     := $(shell od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
endif
E2E_IMAGE   ?= timed-e2e:latest
E2E_TAGS    ?= e2e
E2E_TIMEOUT ?= 15m
E2E_FIGURES  = /tmp/timed-e2e-$(E2E_RUN).figures
E2E_LABEL    = org.timed-project.e2e.run=$(E2E_RUN)
E2E_ATTACKER = $(abspath $(BIN))/tsp-attack
e2e: build e2e-tools
	@docker info >/dev/null 2>&1 || { echo "e2e: no Docker engine reachable (docker info failed)" >&2; exit 1; }
	CGO_ENABLED=0 $(GO) build -trimpath -o $(E2E_ATTACKER) ./tests/e2e/attacker
	docker build -q -f deploy/Dockerfile -t $(E2E_IMAGE) $(BIN)
	$(GO) vet -tags $(E2E_TAGS) ./tests/e2e/... && $(GO) run $(STATICCHECK) -tags $(E2E_TAGS) ./tests/e2e/...
	@trap '$(MAKE) --no-print-directory e2e-clean E2E_RUN=$(E2E_RUN)' EXIT; trap 'exit 130' INT TERM; \
	status=0; \
	TIMED_IMAGE=$(E2E_IMAGE) TIMED_E2E_RUN=$(E2E_RUN) TIMED_E2E_FIGURES=$(E2E_FIGURES) TIMED_E2E_ATTACKER=$(E2E_ATTACKER) \
		$(GO) test -tags $(E2E_TAGS) -count=1 -json -timeout $(E2E_TIMEOUT) ./tests/e2e 2>&1 | $(TESTSUM) -label "docker end-to-end suite" || status=$$?; \
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
	else msg="e2e: no Docker engine reachable (docker info failed): end-to-end suite not run"; \
		echo "$$msg"; mkdir -p $(BUILD); echo "$$msg" >> $(SUMMARY); fi

## e2e-systemd: the package under a real systemd (tests/vmsystemd, build
## tag vm): the .deb of make deb installed and checked in a QEMU guest
## (TCG) booting a minimal Debian with systemd on Debian's kernel, cached
## in $(VM_CACHE) (debootstrap once, by tests/vmsystemd/rootfs.sh; the
## kernel by tests/vm/assets.sh), its NIC a tap in a network namespace
## (tvs$(E2E_RUN)) where bin/timed --clock dry-run is the master; the
## figures as a table at the end. Needs root and /dev/net/tun; without
## them, or without qemu, the test skips and the summary says why.
.PHONY: e2e-systemd e2e-systemd-tools
VM_CACHE      ?= /var/cache/timed-vm
VMSYS_FIGURES  = /tmp/timed-vmsys-$(E2E_RUN).figures
e2e-systemd: build deb e2e-systemd-tools
	$(GO) vet -tags vm ./tests/vmsystemd/ && $(GO) run $(STATICCHECK) -tags vm ./tests/vmsystemd/
	@trap 'ip netns del tvs$(E2E_RUN) 2>/dev/null || true' EXIT; trap 'exit 130' INT TERM; \
	status=0; \
	TIMED_DEB=$(abspath $(DEB)) TIMED_E2E_SYSTEMD_BIN=$(abspath $(BIN)) TIMED_VM_CACHE=$(VM_CACHE) \
	TIMED_E2E_SYSTEMD_RUN=$(E2E_RUN) TIMED_E2E_SYSTEMD_FIGURES=$(VMSYS_FIGURES) \
		$(GO) test -tags vm -count=1 -json -timeout 25m ./tests/vmsystemd 2>&1 | $(TESTSUM) -label "systemd VM suite" || status=$$?; \
	echo; echo "== systemd VM figures (run $(E2E_RUN)) =="; cat $(VMSYS_FIGURES) 2>/dev/null || echo "(none recorded)"; \
	rm -f $(VMSYS_FIGURES); exit $$status

## e2e-systemd-tools: qemu-system-x86, debootstrap, e2fsprogs (mkfs.ext4)
## and cpio from Debian's packages where missing; where they cannot be
## installed the suite skips, saying which is missing
e2e-systemd-tools:
	@bash tests/vm/install-missing.sh "make e2e-systemd" qemu-system-x86_64:qemu-system-x86 debootstrap:debootstrap \
		mkfs.ext4:e2fsprogs cpio:cpio ip:iproute2 || echo "e2e-systemd: could not install its tools: the suite will skip" >&2

## e2e-clean E2E_RUN=…: remove whatever a run left (containers, networks)
e2e-clean:
	@ids=$$(docker ps -aq --filter label=$(E2E_LABEL)); [ -z "$$ids" ] || docker rm -f -v $$ids >/dev/null
	@ids=$$(docker network ls -q --filter label=$(E2E_LABEL)); [ -z "$$ids" ] || docker network rm $$ids >/dev/null
	@left=$$(docker ps -aq --filter label=$(E2E_LABEL))$$(docker network ls -q --filter label=$(E2E_LABEL)); \
	if [ -n "$$left" ]; then echo "e2e-clean: run $(E2E_RUN) left $$left" >&2; exit 1; fi

## vm-tools: what make e2e-vm needs beyond Go, from Debian's packages where
## missing: QEMU (qemu-system-x86), cpio (the guests' initramfs), ip
## (iproute2), flock (util-linux) and chrony's libraries. The guests'
## kernel, busybox and chrony are not installed: tests/vm/assets.sh
## downloads and unpacks them into a cache (the chrony package would start
## a service that disciplines the host's clock; the suite runs its chronyd
## with -x only).
vm-tools:
	@bash tests/vm/install-missing.sh "make e2e-vm" qemu-system-x86_64:qemu-system-x86 cpio:cpio ip:iproute2 flock:util-linux
	@libs=$$(apt-cache depends chrony 2>/dev/null | awk '/Depends: lib/{print $$2}'); \
	if [ -z "$$libs" ]; then apt-get update -qq && libs=$$(apt-cache depends chrony | awk '/Depends: lib/{print $$2}'); fi; \
	[ -n "$$libs" ] || { echo "vm-tools: no chrony in Debian's package lists" >&2; exit 1; }; \
	missing=$$(for p in $$libs; do dpkg-query -W -f='$${Status}\n' "$$p" 2>/dev/null | grep -q 'ok installed' || echo "$$p"; done); \
	[ -z "$$missing" ] || { echo "installing" $$missing "(chrony's libraries, for make e2e-vm)"; \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }

## e2e-vm: the suite of real kernels (tests/vm, build tag vm): four QEMU
## guests (TCG) boot Debian's kernel, fetched by tests/vm/assets.sh into
## $(VM_CACHE), from an initramfs with busybox and
## bin/timed and bin/timedc, on a bridge in a network namespace of the run's
## own (tvm-$(E2E_RUN)); each runs `timed --clock system` from a clock and a
## kernel frequency set off at boot; the measured figures as a table at the
## end. 2–3 minutes (docs/testing.md, "Real kernels"). Where it cannot run (not
## root, no /dev/net/tun, no QEMU and none installable, Debian's mirror
## unreachable) it says why, records that in the summary, and succeeds.
## The namespace, with every guest's tap, is deleted at the end whatever
## happened, after what still runs in it (the scenario's chronyd -x, were
## the test killed) is ended; the guests die with the test.
.PHONY: vm-tools e2e-vm e2e-vm-run
VM_TIMEOUT ?= 10m
VM_FIGURES  = /tmp/timed-vm-$(E2E_RUN).figures
VM_ASSETS   = $(BUILD)/vm-assets-$(E2E_RUN).txt
e2e-vm: build
	@mkdir -p $(BUILD); why=""; \
	if [ "$$(id -u)" != 0 ]; then why="needs root (network namespace, tap devices)"; \
	elif [ ! -c /dev/net/tun ]; then why="no /dev/net/tun (the guests' tap devices need it)"; \
	elif ! $(MAKE) --no-print-directory vm-tools; then why="QEMU or cpio missing and not installable (make vm-tools failed: Debian's mirror unreachable?)"; \
	elif ! TIMED_VM_CACHE=$(VM_CACHE) bash tests/vm/assets.sh > $(VM_ASSETS); then why="no kernel to boot (tests/vm/assets.sh failed: Debian's mirror unreachable?)"; fi; \
	if [ -n "$$why" ]; then msg="e2e-vm: $$why: real-kernel VM suite not run"; \
		echo "$$msg"; echo "$$msg" >> $(SUMMARY); rm -f $(VM_ASSETS); exit 0; fi; \
	$(MAKE) --no-print-directory e2e-vm-run E2E_RUN=$(E2E_RUN)

# e2e-vm-run: the suite itself, once make e2e-vm found what it needs.
e2e-vm-run:
	@trap 'pids=$$(ip netns pids tvm-$(E2E_RUN) 2>/dev/null); [ -z "$$pids" ] || kill $$pids; ip netns del tvm-$(E2E_RUN) 2>/dev/null || true; rm -f $(VM_FIGURES) $(VM_ASSETS)' EXIT; trap 'exit 130' INT TERM; \
	echo "vet and staticcheck, -tags vm"; $(GO) vet -tags vm ./tests/vm/... && $(GO) run $(STATICCHECK) -tags vm ./tests/vm/... || exit 1; \
	status=0; \
	TIMED_E2E_VM_RUN=$(E2E_RUN) TIMED_E2E_VM_BIN=$(abspath $(BIN)) TIMED_E2E_VM_ASSETS=$(abspath $(VM_ASSETS)) TIMED_E2E_FIGURES=$(VM_FIGURES) \
		$(GO) test -tags vm -count=1 -json -timeout $(VM_TIMEOUT) ./tests/vm 2>&1 | $(TESTSUM) -label "real-kernel VM suite" || status=$$?; \
	echo; echo "== VM figures (run $(E2E_RUN)) =="; cat $(VM_FIGURES) 2>/dev/null || echo "(none recorded)"; \
	exit $$status

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

## bench-net: issues 15 and 20's real-network benchmark: for each N of
## BENCH_NET_N and each profile of BENCH_NET_PROFILE (defaults: adaptive rounds;
## fast: 4 s rounds; bsd: BSD-equivalent settings), N daemons of bin/ in N
## network namespaces on one bridge, simulated clocks (offsets within ±0.5 s,
## drifts within ±50 ppm, wandering as crystals do, seeded), all released at
## once and sampled every second for BENCH_NET_DURATION; one table per N, a
## column per profile beside BSD's figures: the time to one master, the steady
## spread (p50/p95/max over the last BENCH_NET_STEADY), the time until the
## spread stays < 1 ms and < 100 µs, packets per slave per minute (whole run,
## steady window) beside BSD's 3, per round, RSS and CPU per daemon; and
## BENCH_NET_PNG, the spread over time, a panel per N, a line per profile.
## Needs root; about an hour with the defaults (9 runs of 6 min; N=5 with
## BENCH_NET_DURATION=2m BENCH_NET_STEADY=1m: 7 min); leaves nothing
## (namespaces, links, the firewall rule it adds).
## BENCH_NET_FAMILY: the links' families, a run per family and N (ipv4, ipv6:
## IPv6-only links, where the daemons meet through the link-local group), e.g.
## `make bench-net BENCH_NET_N=20 BENCH_NET_PROFILE=fast BENCH_NET_FAMILY=ipv4,ipv6`.
## BENCH_NET_LOAD: busy-loop processes beside the daemons (issue 20's loaded
## host: `make bench-net BENCH_NET_N=150 BENCH_NET_PROFILE=fast,defaults BENCH_NET_LOAD=2`).
BENCH_NET_N        ?= 5,20,50
BENCH_NET_PROFILE  ?= defaults,fast,bsd
BENCH_NET_DURATION ?= 6m
BENCH_NET_STEADY   ?= 4m
BENCH_NET_PNG      ?= bench-net.png
BENCH_NET_SEED     ?= 1
BENCH_NET_FAMILY   ?= ipv4
BENCH_NET_LOAD     ?= 0
bench-net: build
	$(GO) run ./cmd/bench-net -bin $(BIN) -n $(BENCH_NET_N) -profile $(BENCH_NET_PROFILE) -duration $(BENCH_NET_DURATION) -steady $(BENCH_NET_STEADY) -png $(BENCH_NET_PNG) -seed $(BENCH_NET_SEED) -family $(BENCH_NET_FAMILY) -load $(BENCH_NET_LOAD)

## bench-defaults: issue 20's figures in virtual time (simsync's
## BenchmarkDefaults, seconds): the defaults (adaptive rounds) beside the
## fast profile and BSD-equivalent settings, N = 5, 20, 50, 150, 60 simulated
## minutes of clocks wandering as typical crystals
bench-defaults:
	$(GO) test -run '^$$' -bench '^BenchmarkDefaults$$' -benchtime 1x ./clocksync/simsync | sed -n 's/^ *simsync_bench_test.go:[0-9]*: //p'

## bench-ring: ring-election messages, bits and time against each paper's
## bound for n = 2^3 … 2^16, and bench-ring.png (messages/(n log2 n) vs n)
bench-ring:
	$(GO) run ./cmd/bench-ring -png bench-ring.png

## fuzz: run every decoder fuzzer for FUZZTIME each (default 3m)
FUZZTIME ?= 3m
fuzz:
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshalExt$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshalSource$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshalReference$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp -run '^$$' -fuzz '^FuzzUnmarshalResign$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp/auth -run '^$$' -fuzz '^FuzzSplit$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp/auth -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME)
	$(GO) test ./clocksync -run '^$$' -fuzz '^FuzzProbeUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./internal/sockopt -run '^$$' -fuzz '^FuzzTxTimestamp$$' -fuzztime $(FUZZTIME)
	$(GO) test ./election/ring -run '^$$' -fuzz '^FuzzUnmarshal$$' -fuzztime $(FUZZTIME)
	$(GO) test ./election/ring/live -run '^$$' -fuzz '^FuzzReceive$$' -fuzztime $(FUZZTIME)
	$(GO) test ./tsp/udp -run '^$$' -fuzz '^FuzzParsePeer$$' -fuzztime $(FUZZTIME)

## man: the man pages timed(8), timedc(8) and their commands', timed.yaml(5),
## and the bash, zsh and fish completions, into build/docs: generated from
## the binaries' own command trees by their hidden `gen-docs` command
## (cmd/internal/gendocs), dated by the last commit so that they are reproducible
DOCS  := $(BUILD)/docs
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || date +%s)
man: build
	rm -rf $(DOCS)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/timed gen-docs $(DOCS)
	SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(BIN)/timedc gen-docs $(DOCS)

## install: binaries, units (timed, timed-wait, timed-reference), the ntp-units.d entry,
## sysusers and tmpfiles entries, an example config
## (kept if one is there), man pages and completions; then it prints what an
## admin does next (docs/operating.md, "Installing in detail")
PREFIX      ?= /usr/local
DESTDIR     ?=
UNITDIR     ?= /lib/systemd/system
MANDIR      ?= $(PREFIX)/share/man
BASHCOMPDIR ?= $(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR  ?= $(PREFIX)/share/zsh/site-functions
FISHCOMPDIR ?= $(PREFIX)/share/fish/vendor_completions.d
install: build man
	install -d $(DESTDIR)$(PREFIX)/sbin $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(UNITDIR) \
		$(DESTDIR)/usr/lib/sysusers.d $(DESTDIR)/usr/lib/tmpfiles.d $(DESTDIR)/usr/lib/systemd/ntp-units.d $(DESTDIR)/etc/timed \
		$(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 \
		$(DESTDIR)$(BASHCOMPDIR) $(DESTDIR)$(ZSHCOMPDIR) $(DESTDIR)$(FISHCOMPDIR)
	install -m 0755 $(BIN)/timed $(DESTDIR)$(PREFIX)/sbin/timed
	install -m 0755 $(BIN)/timedc $(DESTDIR)$(PREFIX)/bin/timedc
	sed 's#/usr/local/sbin/timed#$(PREFIX)/sbin/timed#' systemd/timed.service > $(DESTDIR)$(UNITDIR)/timed.service
	sed 's#/usr/local/bin/timedc#$(PREFIX)/bin/timedc#' systemd/timed-wait.service > $(DESTDIR)$(UNITDIR)/timed-wait.service
	sed 's#/usr/local/sbin/timed#$(PREFIX)/sbin/timed#' systemd/timed-reference.service > $(DESTDIR)$(UNITDIR)/timed-reference.service
	install -m 0644 systemd/50-timed.list $(DESTDIR)/usr/lib/systemd/ntp-units.d/50-timed.list
	install -m 0644 systemd/timed.sysusers $(DESTDIR)/usr/lib/sysusers.d/timed.conf
	install -m 0644 systemd/timed.tmpfiles $(DESTDIR)/usr/lib/tmpfiles.d/timed.conf
	test -e $(DESTDIR)/etc/timed/timed.yaml || install -m 0644 systemd/timed.yaml.example $(DESTDIR)/etc/timed/timed.yaml
	install -m 0644 $(DOCS)/man/man8/*.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 $(DOCS)/man/man5/*.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 $(DOCS)/bash/timed $(DOCS)/bash/timedc $(DESTDIR)$(BASHCOMPDIR)/
	install -m 0644 $(DOCS)/zsh/_timed $(DOCS)/zsh/_timedc $(DESTDIR)$(ZSHCOMPDIR)/
	install -m 0644 $(DOCS)/fish/timed.fish $(DOCS)/fish/timedc.fish $(DESTDIR)$(FISHCOMPDIR)/
	@echo
	@echo "timed is installed. Next, as root:"
	@echo "  systemd-sysusers timed.conf            # the timed user and group"
	@echo "  systemd-tmpfiles --create timed.conf   # /run/timed and /var/lib/timed"
	@echo "  systemctl daemon-reload"
	@echo "  \$${EDITOR:-vi} /etc/timed/timed.yaml       # master, trusted hosts, auth: see timed.yaml(5)"
	@echo "  systemctl enable --now timed"
	@echo "  systemctl enable timed-wait            # optional: hold time-sync.target until synchronised (3 min at most)"
	@echo "  (a reference host beside chrony or ntpd: systemctl enable --now timed-reference instead of timed; docs/operating.md, \"UTC on the LAN\")"
	@echo "  usermod -aG timed ADMIN                # who may run timedc status and step (socket mode 0660)"

## deb: build/timed_VERSION_ARCH.deb (VERSION from git describe,
## packaging/version.sh) with nfpm, pinned: the static binaries, the unit,
## sysusers and tmpfiles entries, /etc/timed/timed.yaml as a conffile, the
## man pages gzipped, the completions, copyright and changelog, and the
## maintainer scripts of packaging/scripts
NFPM           := github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
DEB_VERSION    := $(shell sh packaging/version.sh 2>/dev/null)
DEB_ARCH       := $(shell $(GO) env GOARCH 2>/dev/null)
DEB_MAINTAINER ?= timed project <timed-project@users.noreply.github.com>
DEB_STAGE      := $(BUILD)/deb
DEB            := $(BUILD)/timed_$(DEB_VERSION)_$(DEB_ARCH).deb
deb: man
	DEB_STAGE=$(DEB_STAGE) DOCS=$(DOCS) BIN=$(BIN) GO=$(GO) DEB_VERSION='$(DEB_VERSION)' \
		DEB_MAINTAINER='$(DEB_MAINTAINER)' SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) sh packaging/stage.sh
	rm -f $(BUILD)/timed_*.deb
	DEB_STAGE=$(DEB_STAGE) DEB_VERSION='$(DEB_VERSION)' DEB_ARCH=$(DEB_ARCH) DEB_MAINTAINER='$(DEB_MAINTAINER)' \
		SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) $(GO) run $(NFPM) pkg --config packaging/nfpm.yaml --packager deb --target $(DEB)

## deb-test: make deb, then packaging's test (build tag deb) checks the
## package with dpkg-deb (control fields, files and modes, conffiles,
## maintainer scripts), installs the tree with make install DESTDIR=…, and
## runs lintian once: errors fail, warnings are shown
deb-test: tools deb
	$(GO) vet -tags deb ./packaging/...
	$(GO) run $(STATICCHECK) -tags deb ./packaging/...
	TIMED_DEB=$(abspath $(DEB)) TIMED_DEB_VERSION='$(DEB_VERSION)' \
		$(GO) test -tags deb -count=1 -timeout 5m -json ./packaging 2>&1 | $(TESTSUM) -label "Debian package checks"

clean:
	rm -rf $(BIN) $(BUILD)
