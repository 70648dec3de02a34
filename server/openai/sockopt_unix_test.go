//go:build unix

package openai

import (
	"net"
	"syscall"
)

// smallReceiveDialer dials with a 4 KiB receive buffer set before the
// connection opens (so the advertised window is small too).
func smallReceiveDialer() *net.Dialer {
	return &net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
}
