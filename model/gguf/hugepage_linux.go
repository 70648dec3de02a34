package gguf

import "golang.org/x/sys/unix"

// madvHugepage asks for transparent huge pages.
const madvHugepage = unix.MADV_HUGEPAGE
