// Package e2e is the end-to-end suite: timed daemons in containers on a
// docker-compose bridge network, or several joined by gateways
// (deploy/, networks_test.go), checked from `timedc status
// --json` on every host while hosts are killed, networks partitioned,
// links made lossy and the daemons attacked from a container of their own
// (attack_test.go, with the attacker of tests/e2e/attacker). The tests are behind the e2e build tag and need a
// Docker engine, root (nsenter, iptables, tcpdump) and the image that
// `make e2e` builds; `make test` runs them when `docker info` succeeds.
package e2e
