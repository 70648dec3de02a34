package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// Pool is a persistent set of worker goroutines that share loops with the
// calling goroutine. Work is handed out in chunks from an atomic counter, so
// a busy core does not hold the others up; no goroutine is started and
// nothing is allocated per call.
//
// A Pool runs one parallel loop at a time: concurrent calls to For or MatMul
// are serialized by a mutex (fn must not call back into the same Pool, which
// would deadlock). Close stops the workers; a closed Pool runs loops on the
// caller alone.
type Pool struct {
	mu      sync.Mutex // serializes For/MatMul callers; protects scratch and the job fields below
	threads int
	wake    []chan struct{} // one per helper goroutine (threads-1)
	done    chan struct{}   // each helper sends once per job
	closed  bool

	// current job (written under mu before waking helpers)
	job   func(lo, hi int)
	n     int
	chunk int
	next  atomic.Int64

	scratch matmulScratch
}

// NewPool starts a pool of threads workers including the caller (threads-1
// goroutines). threads <= 0 means runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, done: make(chan struct{}, threads)}
	p.wake = make([]chan struct{}, threads-1)
	for i := range p.wake {
		p.wake[i] = make(chan struct{}, 1)
		go p.worker(p.wake[i])
	}
	return p
}

// Threads returns the number of workers, the caller included.
func (p *Pool) Threads() int { return p.threads }

// Close stops the helper goroutines; it is safe to call twice. Later calls
// to For and MatMul run on the caller's goroutine only.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, c := range p.wake {
		close(c)
	}
}

func (p *Pool) worker(wake chan struct{}) {
	for range wake {
		p.runChunks()
		p.done <- struct{}{}
	}
}

// runChunks takes chunks of the current job until none are left.
func (p *Pool) runChunks() {
	n, chunk, fn := p.n, p.chunk, p.job
	for {
		hi := int(p.next.Add(int64(chunk)))
		lo := hi - chunk
		if lo >= n {
			return
		}
		fn(lo, min(hi, n))
	}
}

// For splits [0, n) into chunks, runs fn on each chunk across the workers
// (the caller participates) and returns when all are done. fn must be safe
// to call concurrently on disjoint ranges.
func (p *Pool) For(n int, fn func(lo, hi int)) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forLocked(n, 0, fn)
}

// forLocked runs fn over [0, n) in chunks of at least minChunk (0: chosen
// here). The caller holds p.mu.
func (p *Pool) forLocked(n, minChunk int, fn func(lo, hi int)) {
	helpers := p.threads - 1
	if p.closed {
		helpers = 0
	}
	// About four chunks per worker balances load without much contention.
	chunk := max(1, minChunk, (n+4*p.threads-1)/(4*p.threads))
	if helpers == 0 || n <= chunk {
		fn(0, n)
		return
	}
	helpers = min(helpers, (n+chunk-1)/chunk-1)
	p.job, p.n, p.chunk = fn, n, chunk
	p.next.Store(0)
	for _, c := range p.wake[:helpers] {
		c <- struct{}{}
	}
	p.runChunks()
	for range helpers {
		<-p.done
	}
	p.job = nil
}
