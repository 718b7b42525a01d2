// Package e2e is the end-to-end suite: timed daemons in containers on a
// docker-compose bridge network (deploy/), checked from `timedc status
// --json` on every host while hosts are killed, networks partitioned and
// links made lossy. The tests are behind the e2e build tag and need a
// Docker engine, root (nsenter, iptables, tcpdump) and the image that
// `make e2e` builds; `make test` runs them when `docker info` succeeds.
package e2e
