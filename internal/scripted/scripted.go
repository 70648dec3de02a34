// Package scripted is test support: a paged K/V store for fake models that
// keeps token ids instead of keys and values, so a fake engine.Model can
// read a sequence back through its page table (a wrong page table shows up
// as wrong output), and the suffix rule scripted models use to pick the
// next token. Only tests import it.
package scripted

import (
	"fmt"
	"slices"
	"sync"

	"oengine/engine"
)

// KV is a paged store of token ids: slots [page][slot], -1 unwritten.
type KV struct {
	mu    sync.Mutex // protects slots
	ps    int
	slots [][]int32
}

// NewKV allocates pages of pageSize unwritten slots.
func NewKV(pages, pageSize int) *KV {
	kv := &KV{ps: pageSize, slots: make([][]int32, pages)}
	for i := range kv.slots {
		kv.slots[i] = make([]int32, pageSize)
		for j := range kv.slots[i] {
			kv.slots[i][j] = -1
		}
	}
	return kv
}

// CopyPage implements engine.KV.
func (kv *KV) CopyPage(dst, src int32) {
	kv.mu.Lock()
	copy(kv.slots[dst], kv.slots[src])
	kv.mu.Unlock()
}

// Forward stores every token of b at its position in its sequence's pages,
// then calls next once per logits row with the row's sequence read back
// from the pages (its last window tokens; window <= 0: all of them) and
// writes a one-hot row (logit 10) for the token next returns.
func (kv *KV) Forward(b *engine.Batch, logits []float32, vocab, window int, next func(seq []int32) int32) error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i, tok := range b.Tokens {
		pages := b.Seqs[b.Seq[i]]
		p := int(b.Pos[i])
		if p/kv.ps >= len(pages) {
			return fmt.Errorf("scripted: position %d beyond the page table", p)
		}
		kv.slots[pages[p/kv.ps]][p%kv.ps] = tok
	}
	seq := make([]int32, 0, 64)
	for r, ti := range b.Logits {
		pages := b.Seqs[b.Seq[ti]]
		pos := int(b.Pos[ti])
		from := 0
		if window > 0 {
			from = max(0, pos+1-window)
		}
		seq = seq[:0]
		for q := from; q <= pos; q++ {
			v := kv.slots[pages[q/kv.ps]][q%kv.ps]
			if v < 0 {
				return fmt.Errorf("scripted: position %d unwritten", q)
			}
			seq = append(seq, v)
		}
		row := logits[r*vocab : (r+1)*vocab]
		clear(row)
		row[next(seq)] = 10
	}
	return nil
}

// Next is script[j] for the longest j < len(script) such that seq ends
// with script[:j] (script[0] when none does): a generation that follows
// the script from any point of it.
func Next(seq, script []int32) int32 {
	for j := min(len(seq), len(script)-1); j > 0; j-- {
		if slices.Equal(seq[len(seq)-j:], script[:j]) {
			return script[j]
		}
	}
	return script[0]
}
