// Package tests holds the integration tests that run real timed and timedc
// processes on loopback (127.0.0.1, and ::1 for IPv6), tests that run them
// in network namespaces on a bridge (as root: an IPv6-only link, a link of
// mixed families; netns_test.go, on bench/netbench's namespaces), and
// checks of the files we ship (the systemd unit). The end-to-end suite on
// a docker-compose network lives in tests/e2e behind the e2e build tag.
package tests
