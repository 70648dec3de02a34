package cpu

import (
	"fmt"

	"oengine/ggml"
)

// MatOp is one product of a fused MatMuls call: Dst[i*W.Rows+r] = dot(row r
// of W, token i of x). Dst is [n][W.Rows].
type MatOp struct {
	Dst []float32
	W   Matrix
}

// maxMatOps bounds the products of one MatMuls call (q/k/v and gate/up
// need three and two).
const maxMatOps = 8

// opPlan is one product of the call in progress.
type opPlan struct {
	w     Matrix
	k     kernel
	dst   []float32
	rb    int // w's bytes per row
	nrc   int // row chunks
	first int // index of its first work item
}

// matmulScratch is the Pool's reusable MatMul state.
type matmulScratch struct {
	act  [actQ8K + 1]actBuf  // quantized activations per kind
	need [actQ8K + 1]bool    // kinds the call in progress needs
	fn   func(w, lo, hi int) // p.matmulChunk, bound once
	qfn  func(lo, hi int)    // p.quantChunk, bound once
	ops  [maxMatOps]opPlan
	nops int
	q5c  bool // a product has Q5_0 decode-layout rows: quantChunk writes act[actQ8_0].q5c
	x    []float32
	cols int
	n    int
	rowC int // rows per work item
	tokC int // tokens per work item
	ntc  int // token tiles
	// panels are per-worker packed weight panels (dot_blk.go), [threads][...]
	panels [][]byte
	// four are per-worker results of a four-token group that computes
	// the last two or three tokens of a tile (tile), [threads].
	four [][4 * fourRows]float32
	// rows are per-worker rows converted to Q8_0, and rowOps the Q8_0
	// products over them (tileConv), [threads].
	rows   [][]byte
	rowOps []opPlan
}

// fourRows is the most rows of a tile of a product of at most 8 tokens, or
// of quantized weights (runPlanned's row chunk).
const fourRows = 16

// MatMul computes dst[i*w.Rows+r] = dot(row r of w, x[i*w.Cols:(i+1)*w.Cols])
// for i in [0, n). x is [n][Cols] float32 row-major, dst is [n][Rows].
//
// Quantized weights use quantized activations, as ggml's CPU backend does
// (see quant_act.go), then exact integer block sums and float32
// accumulation; F32, F16 and BF16 weights use float32 activations and FMA.
// Accuracy against the exact dot Σ w·x (DotRef): for Q8_0/Q8_1 activations
// |err| ≤ Σ|w_i|·0.57·amax_b/127 (+ |m_b|·32·amax_b·2^-11 per Q4_1/Q5_1
// block), for Q8_K ≤ Σ|w_i|·0.5·amax_b/127, where amax_b is the largest |x|
// of the element's activation block, plus 2e-5·Σ|w·x| of float32 rounding
// (the float types have only the latter). Tests: TestDotGolden, TestMatMulVsRef.
//
// Work is split over rows (and over tokens when n is large). The result for
// one (row, token) is bitwise independent of n, of the other tokens and of
// the thread count (batch invariance). MatMul panics if the slices are too
// short (a programming error, like an index out of range).
func (p *Pool) MatMul(dst []float32, w Matrix, x []float32, n int) {
	if n <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.planOp(0, MatOp{Dst: dst, W: w}, x, n)
	p.runPlanned(1, x, w.Cols, n)
}

// MatMuls computes several products of the same activations x ([n][cols],
// every ops[j].W has Cols = cols) in one parallel loop: x is quantized once
// per activation kind instead of once per product, and the workers are
// woken once. Each result is bitwise what MatMul(op.Dst, op.W, x, n) gives.
// Typical use: q, k, v = xb·Wqᵀ, xb·Wkᵀ, xb·Wvᵀ; gate and up. At most 8 ops.
// It panics on bad shapes, like MatMul.
func (p *Pool) MatMuls(ops []MatOp, x []float32, n int) {
	if len(ops) == 0 || n <= 0 {
		return
	}
	if len(ops) > maxMatOps {
		panic(fmt.Sprintf("cpu: MatMuls with %d ops (at most %d)", len(ops), maxMatOps))
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	cols := ops[0].W.Cols
	for j, op := range ops {
		if op.W.Cols != cols {
			panic(fmt.Sprintf("cpu: MatMuls op %d has %d columns, op 0 has %d", j, op.W.Cols, cols))
		}
		p.planOp(j, op, x, n)
	}
	p.runPlanned(len(ops), x, cols, n)
}

// planOp validates op and records it as product j of the call. p.mu is held.
func (p *Pool) planOp(j int, op MatOp, x []float32, n int) {
	w := op.W
	k, ok := kernels[w.Type]
	if !ok {
		panic(fmt.Sprintf("cpu: MatMul on unsupported type %s", w.Type))
	}
	if n < 0 || w.Rows <= 0 || w.Cols <= 0 || w.Cols%w.Type.BlockElems() != 0 ||
		len(x) < n*w.Cols || len(op.Dst) < n*w.Rows || len(w.Data) < w.Rows*w.rowBytes() {
		panic(fmt.Sprintf("cpu: MatMul shapes: dst %d, x %d, n %d, w %dx%d (%d bytes)", len(op.Dst), len(x), n, w.Rows, w.Cols, len(w.Data)))
	}
	p.scratch.ops[j] = opPlan{w: w, k: k, dst: op.Dst, rb: w.rowBytes()}
}

// prefillFloatRows is the row tile of prefill products whose activations
// stay float32 (0: the default 16); a variable for benchmarks.
var prefillFloatRows = 64

// runPlanned quantizes the activations and runs the nops planned products.
// p.mu is held.
func (p *Pool) runPlanned(nops int, x []float32, cols, n int) {
	s := &p.scratch
	defer func() {
		for j := range s.ops[:nops] {
			s.ops[j] = opPlan{}
		}
		s.x = nil
	}()
	if n <= 0 {
		return
	}
	if s.fn == nil {
		s.fn = p.matmulChunk
		s.qfn = p.quantChunk
		s.panels = make([][]byte, p.threads)
		s.four = make([][4 * fourRows]float32, p.threads)
		s.rows = make([][]byte, p.threads)
		s.rowOps = make([]opPlan, p.threads)
	}
	s.nops, s.x, s.cols, s.n = nops, x, cols, n
	s.need = [actQ8K + 1]bool{}
	maxRows, work := 0, 0
	// Prefill row tiles of float weights: F16 activations stay float32
	// (4·cols bytes per token), so a 16-row tile re-reads all the tokens'
	// activations from L3 for every 16 rows; 64 rows read them a quarter
	// as often (the weights of 64 rows stay in L2).
	floatRows := prefillFloatRows
	for _, op := range s.ops[:nops] {
		if op.k.act != actF32 {
			floatRows = 0
		}
	}
	for _, op := range s.ops[:nops] {
		if op.k.act != actF32 && !s.need[op.k.act] {
			s.need[op.k.act] = true
			s.act[op.k.act].prepare(op.k.act, n, cols)
		}
		maxRows = max(maxRows, op.w.Rows)
		work += op.w.Rows * cols * n
	}
	if n >= 4 && n*cols >= 1<<14 && p.threads > 1 {
		p.forLocked(n, 1, s.qfn)
	} else {
		p.quantChunk(0, n)
	}
	// Work items: row chunks of about 16 rows, token tiles when n is large.
	s.rowC = max(1, min(16, (maxRows+p.threads-1)/p.threads))
	if s.rowC > 8 {
		s.rowC = 16 // whole 8-row groups for the blocked kernels
	}
	for _, op := range s.ops[:nops] {
		if op.w.dl {
			s.rowC = 16 // whole groups of a decode layout
		}
	}
	s.tokC = n
	if n > 8 {
		// Large token tiles: a packed weight panel (and a row in L1)
		// is reused by up to 512 tokens, so packing stays a few percent;
		// activations stream from L2/L3.
		s.tokC, s.rowC = min(512, (n+7)&^7), 16
		if floatRows > 0 {
			s.rowC = floatRows
		}
	}
	s.ntc = (n + s.tokC - 1) / s.tokC
	items := 0
	for j := range s.ops[:nops] {
		op := &s.ops[j]
		op.nrc = (op.w.Rows + s.rowC - 1) / s.rowC
		op.first = items
		items += op.nrc * s.ntc
	}
	if work < smallMatMul {
		p.matmulChunk(0, 0, items) // waking workers would cost more than the work
	} else {
		// Guided split: each grab takes half of what is left per thread
		// (at least two items), so a thread first streams a long run of
		// weight rows (one prefetchable stream per core) and the tail is cut
		// into short chunks the faster thread picks up (the wait at the end
		// is about one short chunk). Measured against fixed chunks of
		// items/(4·threads) and items/(32·threads) on tinyllama tg128, 2
		// threads (docs/performance.md): best or level on every type.
		chunk, guided := 2, 2*p.threads
		p.forChunksW(items, chunk, guided, nil, s.fn)
	}
}

// quantChunk quantizes tokens [lo, hi) for every activation kind needed.
func (p *Pool) quantChunk(lo, hi int) {
	s := &p.scratch
	for k := range s.need {
		if !s.need[k] {
			continue
		}
		for i := lo; i < hi; i++ {
			s.act[k].quantizeToken(actKind(k), i, s.cols, s.x[i*s.cols:(i+1)*s.cols])
		}
	}
}

// matmulChunk computes work items [lo, hi). The items of product j are
// numbered from ops[j].first; within a product, item it covers row chunk
// it%nrc and token tile it/nrc.
func (p *Pool) matmulChunk(worker, lo, hi int) {
	s := &p.scratch
	j := 0
	for it := lo; it < hi; it++ {
		for j+1 < s.nops && it >= s.ops[j+1].first {
			j++
		}
		op := &s.ops[j]
		local := it - op.first
		r0 := (local % op.nrc) * s.rowC
		t0 := (local / op.nrc) * s.tokC
		p.tile(worker, op, r0, min(r0+s.rowC, op.w.Rows), t0, min(t0+s.tokC, s.n))
	}
}

// tile computes rows [r0, r1) of op for tokens [t0, t1), scaled back for
// a converted BF16 matrix (bf16_f16.go).
func (p *Pool) tile(worker int, op *opPlan, r0, r1, t0, t1 int) {
	p.tileStored(worker, op, r0, r1, t0, t1)
	if op.w.pow2 != 0 {
		for t := t0; t < t1; t++ {
			op.w.unscale(op.dst[t*op.w.Rows+r0 : t*op.w.Rows+r1])
		}
	}
}

// tileStored is tile for the matrix as stored.
func (p *Pool) tileStored(worker int, op *opPlan, r0, r1, t0, t1 int) {
	if op.k.blk != nil {
		if op.k.blk.conv != nil {
			p.tileConv(worker, op, r0, r1, t0, t1)
		} else {
			p.tileBlk(worker, op, r0, r1, t0, t1)
		}
		return
	}
	if r0 < op.w.dlRows() { // Q5_1 and K-quant decode layouts (q5_0_decode.go, k_decode.go); tiles are whole groups
		if op.w.Type == ggml.TypeQ5_1 {
			p.tileQ5_1Z(op, r0, r1, t0, t1)
		} else {
			p.tileKZ(op, r0, r1, t0, t1)
		}
		return
	}
	s := &p.scratch
	w, k := op.w, op.k
	rb := op.rb
	a := &s.act[k.act]
	var v actView
	i := p.tileF16(op, r0, r1, t0, t1) // F16 2×6 tile (dot_f16tile*): tokens done; t0 otherwise
	if p.rowsF16(op, r0, r1, i, t1) {
		return // F16, two or three tokens left (dot_f16rows*)
	}
	if k.dot22 != nil && r1-r0 >= 2 {
		for ; i+2 <= t1; i += 2 {
			a.viewN(k.act, i, 2, w.Cols, s.x, &v)
			r := r0
			for ; r+2 <= r1; r += 2 {
				o := k.dot22(w.Data[r*rb:(r+2)*rb], rb, v, w.Cols)
				op.dst[i*w.Rows+r], op.dst[(i+1)*w.Rows+r] = o[0], o[1]
				op.dst[i*w.Rows+r+1], op.dst[(i+1)*w.Rows+r+1] = o[2], o[3]
			}
			if r < r1 { // odd row left
				var v1 actView
				for j := i; j < i+2; j++ {
					a.view(k.act, j, w.Cols, s.x, &v1)
					op.dst[j*w.Rows+r] = k.dot(w.Data[r*rb:(r+1)*rb], v1)
				}
			}
		}
	}
	if k.dot4 != nil {
		for ; i+4 <= t1; i += 4 {
			a.viewN(k.act, i, 4, w.Cols, s.x, &v)
			if k.dot4r != nil {
				k.dot4r(w.Data[r0*rb:r1*rb], rb, v, w.Cols, op.dst[i*w.Rows+r0:], w.Rows)
				continue
			}
			for r := r0; r < r1; r++ {
				o := k.dot4(w.Data[r*rb:(r+1)*rb], v, w.Cols)
				for jj, val := range o {
					op.dst[(i+jj)*w.Rows+r] = val
				}
			}
		}
		// Two or three tokens left (a step of a few decoders, or a token
		// verifying drafts): one more four-token group reads each row
		// once instead of two or three times through the one-token
		// kernel. The Q8_K scratch holds whole groups of four (prepare),
		// so the group's other tokens are the next tile's or zero; only
		// this tile's results are stored.
		if left := t1 - i; left >= 2 && k.act == actQ8K && kquantFewOn {
			a.viewN(k.act, i, 4, w.Cols, s.x, &v)
			if k.dot4r != nil && r1-r0 <= fourRows {
				four := s.four[worker][:]
				k.dot4r(w.Data[r0*rb:r1*rb], rb, v, w.Cols, four, fourRows)
				for jj := range left {
					copy(op.dst[(i+jj)*w.Rows+r0:(i+jj)*w.Rows+r1], four[jj*fourRows:])
				}
			} else {
				for r := r0; r < r1; r++ {
					o := k.dot4(w.Data[r*rb:(r+1)*rb], v, w.Cols)
					for jj := range left {
						op.dst[(i+jj)*w.Rows+r] = o[jj]
					}
				}
			}
			i = t1
		}
	}
	for ; i < t1; i++ {
		a.view(k.act, i, w.Cols, s.x, &v)
		out := op.dst[i*w.Rows : (i+1)*w.Rows]
		if decodeRows(w.Type, w.Data[r0*rb:r1*rb], rb, v, out[r0:r1]) {
			continue // many-row decode kernel (dot_gemv*)
		}
		for r := r0; r < r1; r++ {
			out[r] = k.dot(w.Data[r*rb:(r+1)*rb], v)
		}
	}
}
