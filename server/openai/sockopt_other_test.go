//go:build !unix

package openai

import "net"

// smallReceiveDialer is nil where the socket option is not set portably.
func smallReceiveDialer() *net.Dialer { return nil }
