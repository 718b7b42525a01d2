//go:build !linux

package sockopt

import (
	"errors"
	"syscall"
	"time"
)

// EnableTxTimestamps: only Linux reports transmit timestamps.
func EnableTxTimestamps(syscall.RawConn) error {
	return errors.ErrUnsupported
}

// TxCmsg is empty where there are no transmit timestamps.
var TxCmsg []byte

// ReadTxTimestamp never finds a stamp here.
func ReadTxTimestamp(syscall.RawConn, time.Time, time.Duration) (time.Time, bool) {
	return time.Time{}, false
}
