// Package tests holds the integration tests that run real timed and timedc
// processes on loopback, and checks of the files we ship (the systemd
// unit). The end-to-end suite on a docker-compose network lives in
// tests/e2e behind the e2e build tag.
package tests
