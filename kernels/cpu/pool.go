package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a persistent set of worker goroutines that share loops with the
// calling goroutine. Work is handed out in chunks from an atomic counter, so
// a busy core does not hold the others up; no goroutine is started and
// nothing is allocated per call.
//
// Hand-off is a spin-then-sleep protocol: between loops a worker spins on
// the job generation for a short while (spinTime) before
// it parks on its wake channel, and the caller spins the same way for the
// workers to finish before it parks on done. A decode step issues hundreds
// of short loops (one per MatMul), and waking a parked goroutine costs
// several µs each time; spinning keeps both cores on the step.
//
// A Pool runs one parallel loop at a time: concurrent calls to For or MatMul
// are serialized by a mutex (fn must not call back into the same Pool, which
// would deadlock). Close stops the workers; a closed Pool runs loops on the
// caller alone.
type Pool struct {
	mu      sync.Mutex // serializes For/MatMul callers; protects scratch and the job fields below
	threads int
	workers []*poolWorker // threads-1 helpers
	closed  bool

	// current job (written under mu before gen is bumped); jobW, when set,
	// also receives the worker index (0: the caller, 1..threads-1: helpers)
	// The descriptor is published through cur (an atomic store after the
	// slot is filled) so helpers read it with a happens-before edge; two
	// slots alternate so a job never rewrites the descriptor helpers of the
	// previous job were handed.
	jobs [2]poolJob
	slot int
	cur  atomic.Pointer[poolJob]
	next atomic.Int64

	gen     atomic.Uint64 // job generation; bumped to hand out a job, closing: see quit
	quit    atomic.Bool   // set by Close before the last bump
	pending atomic.Int32  // helpers still running the current job
	// callerParked is 1 while the caller sleeps on done; the helper that
	// brings pending to zero clears it and sends on done.
	callerParked atomic.Int32
	done         chan struct{}

	scratch matmulScratch
}

// poolJob describes one For/MatMul job: [0, n) in chunks of chunk items.
type poolJob struct {
	fn    func(lo, hi int)
	fnW   func(w, lo, hi int)
	n     int
	chunk int
	// guided > 0: each grab takes max(chunk, remaining/guided) items
	// (long weight streams first, short ones at the end); 0: fixed chunks.
	guided int
}

// poolWorker is one helper goroutine's parking state.
type poolWorker struct {
	parked atomic.Int32  // 1 while the worker sleeps (or is about to) on wake
	wake   chan struct{} // capacity 1
	id     int           // worker index passed to jobW
	_      [40]byte      // keep workers' flags on separate cache lines
}

// spinTime is how long a waiting side polls before parking: longer than
// the gap between the loops of one decode step (a few µs of serial work),
// short enough not to burn a core between requests.
const spinTime = 50 * time.Microsecond

// spinner polls until done() or spinTime has passed; it reports done().
func spin(done func() bool) bool {
	var deadline time.Time
	for i := 0; ; i++ {
		if done() {
			return true
		}
		if i&63 == 63 {
			now := time.Now()
			if deadline.IsZero() {
				deadline = now.Add(spinTime)
			} else if now.After(deadline) {
				return false
			}
			if i&1023 == 1023 {
				runtime.Gosched()
			}
		}
	}
}

// NewPool starts a pool of threads workers including the caller (threads-1
// goroutines). threads <= 0 means runtime.NumCPU().
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	p := &Pool{threads: threads, done: make(chan struct{}, 1)}
	p.workers = make([]*poolWorker, threads-1)
	for i := range p.workers {
		w := &poolWorker{wake: make(chan struct{}, 1), id: i + 1}
		p.workers[i] = w
		go p.worker(w)
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
	p.quit.Store(true)
	p.gen.Add(1)
	for _, w := range p.workers {
		p.rouse(w)
	}
}

// rouse wakes w if it is parked (or about to park).
func (p *Pool) rouse(w *poolWorker) {
	if w.parked.CompareAndSwap(1, 0) {
		w.wake <- struct{}{}
	}
}

func (p *Pool) worker(w *poolWorker) {
	var seen uint64
	for {
		g := p.waitJob(w, seen)
		seen = g
		if p.quit.Load() {
			return
		}
		p.runChunks(w.id)
		if p.pending.Add(-1) == 0 && p.callerParked.CompareAndSwap(1, 0) {
			p.done <- struct{}{}
		}
	}
}

// waitJob returns the job generation once it differs from seen: it spins,
// then parks on w.wake.
func (p *Pool) waitJob(w *poolWorker, seen uint64) uint64 {
	if spin(func() bool { return p.gen.Load() != seen }) {
		return p.gen.Load()
	}
	for {
		w.parked.Store(1)
		if g := p.gen.Load(); g != seen {
			if !w.parked.CompareAndSwap(1, 0) {
				<-w.wake // rouse already sent: consume it
			}
			return g
		}
		<-w.wake
		if g := p.gen.Load(); g != seen {
			return g
		}
	}
}

// runChunks takes chunks of the current job until none are left; worker
// is the caller's index for jobW.
func (p *Pool) runChunks(worker int) {
	j := p.cur.Load()
	n, chunk, fn, fnW := j.n, j.chunk, j.fn, j.fnW
	for j.guided > 0 {
		lo := int(p.next.Load())
		if lo >= n {
			return
		}
		hi := lo + max(chunk, (n-lo)/j.guided)
		if !p.next.CompareAndSwap(int64(lo), int64(hi)) {
			continue
		}
		if fnW != nil {
			fnW(worker, lo, min(hi, n))
		} else {
			fn(lo, min(hi, n))
		}
	}
	for {
		hi := int(p.next.Add(int64(chunk)))
		lo := hi - chunk
		if lo >= n {
			return
		}
		if fnW != nil {
			fnW(worker, lo, min(hi, n))
		} else {
			fn(lo, min(hi, n))
		}
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
	chunk := max(1, minChunk, (n+4*p.threads-1)/(4*p.threads))
	p.forChunks(n, chunk, fn)
}

// forChunks runs fn over [0, n) in chunks of exactly chunk items (the last
// may be short). Every helper joins the job (spinning helpers are cheap to
// include, and a job is short). The caller holds p.mu.
func (p *Pool) forChunks(n, chunk int, fn func(lo, hi int)) {
	p.forChunksW(n, chunk, 0, fn, nil)
}

// forChunksW is forChunks with either fn or fnW (which also gets the
// worker index, for per-worker scratch). The caller holds p.mu.
func (p *Pool) forChunksW(n, chunk, guided int, fn func(lo, hi int), fnW func(w, lo, hi int)) {
	helpers := len(p.workers)
	if p.closed || helpers == 0 || n <= chunk {
		if fnW != nil {
			fnW(0, 0, n)
		} else {
			fn(0, n)
		}
		return
	}
	p.slot ^= 1
	j := &p.jobs[p.slot]
	j.fn, j.fnW, j.n, j.chunk, j.guided = fn, fnW, n, chunk, guided
	p.cur.Store(j)
	p.next.Store(0)
	p.pending.Store(int32(helpers))
	p.gen.Add(1)
	for _, w := range p.workers {
		p.rouse(w)
	}
	p.runChunks(0)
	p.waitHelpers()
}

// waitHelpers returns when every helper has finished the current job.
func (p *Pool) waitHelpers() {
	if spin(func() bool { return p.pending.Load() == 0 }) {
		return
	}
	p.callerParked.Store(1)
	if p.pending.Load() == 0 {
		if !p.callerParked.CompareAndSwap(1, 0) {
			<-p.done
		}
		return
	}
	<-p.done
}
