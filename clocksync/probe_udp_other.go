//go:build !linux

package clocksync

import (
	"net"
	"time"
)

func enableRxTimestamps(c *net.UDPConn) error { return ErrUnsupported }

func rxTimestamp(oob []byte) (time.Time, bool) { return time.Time{}, false }
