//go:build !linux

package main

import (
	"errors"
	"net/netip"
)

func newSpoofSender(netip.AddrPort) (sender, error) {
	return nil, errors.New("-spoof needs Linux raw sockets")
}
