//go:build !linux

package sockopt

import (
	"errors"
	"syscall"
	"time"
)

// TxStamper is unavailable here: NewTxStamper fails.
type TxStamper struct{}

// NewTxStamper: only Linux reports transmit timestamps.
func NewTxStamper(syscall.RawConn) (*TxStamper, error) { return nil, errors.ErrUnsupported }

// Write only writes.
func (*TxStamper) Write(write func(oob []byte) error) (time.Time, bool, error) {
	return time.Time{}, false, write(nil)
}
