//go:build unix && !linux

package gguf

import "golang.org/x/sys/unix"

// madvHugepage: no transparent huge pages to ask for; normal advice.
const madvHugepage = unix.MADV_NORMAL
