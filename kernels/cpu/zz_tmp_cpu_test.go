package cpu

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"
	"time"
)

func threadCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(1, &ru) // RUSAGE_THREAD
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestTmpCPUThroughput(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pool := NewPool(1)
	defer pool.Close()
	b := &testing.B{}
	for _, impl := range []string{"portable", "simd"} {
		for _, typ := range allTypes {
			saved := kernels[typ]
			if impl == "portable" {
				kernels[typ] = portable[typ]
			}
			for _, n := range []int{1, 32} {
				w := benchMatrix(b, typ, 2048, 2048)
				x := randNormal(rand.New(rand.NewPCG(2, 3)), n*2048, 1)
				dst := make([]float32, n*2048)
				pool.MatMul(dst, w, x, n)
				iters := 1
				if n == 1 { iters = 20 }
				if impl == "portable" && n == 32 { iters = 1 }
				c0 := threadCPU()
				for i := 0; i < iters; i++ {
					pool.MatMul(dst, w, x, n)
				}
				c := threadCPU() - c0
				per := float64(c.Nanoseconds()) / float64(iters)
				fmt.Printf("%-8s %-5s n=%-2d %8.3f ms/call  %7.2f GB/s weights  %7.3f ms/token\n", impl, typ, n, per/1e6, float64(len(w.Data))/per, per/1e6/float64(n))
			}
			kernels[typ] = saved
		}
	}
}
