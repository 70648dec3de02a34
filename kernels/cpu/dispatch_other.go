//go:build !amd64

package cpu

// detectISA: only the portable kernels exist on this architecture.
func detectISA() isa { return isaGeneric }

// kernelSetFor: the portable kernels.
func kernelSetFor(isa) kernelSet {
	return kernelSet{isa: isaGeneric, matmul: clonedKernels(portable)}
}
