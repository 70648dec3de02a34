package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestPoolFor(t *testing.T) {
	cases := []struct {
		name       string
		threads, n int
	}{
		{"single thread", 1, 100}, {"empty", 4, 0}, {"one item", 4, 1},
		{"fewer items than threads", 8, 3}, {"uneven", 3, 1001}, {"default threads", 0, 257},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := NewPool(c.threads)
			defer p.Close()
			if c.threads > 0 && p.Threads() != c.threads || p.Threads() < 1 {
				t.Fatalf("Threads() = %d", p.Threads())
			}
			for rep := 0; rep < 3; rep++ {
				hits := make([]int32, c.n)
				p.For(c.n, func(lo, hi int) {
					if lo < 0 || hi > c.n || lo >= hi {
						t.Errorf("bad range [%d,%d)", lo, hi)
						return
					}
					for i := lo; i < hi; i++ {
						atomic.AddInt32(&hits[i], 1)
					}
				})
				for i, h := range hits {
					if h != 1 {
						t.Fatalf("index %d visited %d times", i, h)
					}
				}
			}
		})
	}
}

// TestPoolUsesWorkers: with chunks that wait for company, more than one
// goroutine must take part (otherwise the pool would be sequential).
func TestPoolUsesWorkers(t *testing.T) {
	p := NewPool(3)
	defer p.Close()
	var running, peak atomic.Int32
	p.For(12, func(lo, hi int) {
		n := running.Add(1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		deadline := time.Now().Add(2 * time.Second)
		for peak.Load() < 2 && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		running.Add(-1)
	})
	if peak.Load() < 2 {
		t.Fatalf("peak concurrency %d, want >= 2", peak.Load())
	}
}

// TestPoolConcurrentCallers: callers on several goroutines are serialized
// and each gets its own complete loop (run with -race).
func TestPoolConcurrentCallers(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for rep := 0; rep < 50; rep++ {
				var sum atomic.Int64
				p.For(100, func(lo, hi int) {
					for i := lo; i < hi; i++ {
						sum.Add(int64(i))
					}
				})
				if sum.Load() != 4950 {
					t.Errorf("sum %d", sum.Load())
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestPoolClose(t *testing.T) {
	p := NewPool(4)
	p.Close()
	p.Close() // twice is fine
	n := 0
	p.For(10, func(lo, hi int) { n += hi - lo }) // caller only: no race on n
	if n != 10 {
		t.Fatalf("closed pool ran %d of 10", n)
	}
}
