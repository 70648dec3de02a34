package engine

import (
	"fmt"
	"oengine/model/tokenizer"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// fakeModel is a deterministic toy model with a real paged K/V contract:
// Forward stores each token (and its position) in its page slot and the
// logits of position p are a hash of the tokens read back from positions
// 0..p of the sequence's pages. A wrong page table, a missed copy-on-write
// or a stale prefix page changes the logits.
type fakeModel struct {
	vocab, ctx int
	eosAt      int                            // from this position on, EOS (id 0) gets the top logit; 0 = never
	gate       chan struct{}                  // when set, every Forward waits for a receive
	echo       int                            // > 0: the token echo positions back gets a bonus, so outputs repeat (n-gram drafts hit)
	echoBonus  float32                        // that bonus; 0: 5 (the hash logits span [0, 8))
	salt       uint64                         // changes every logit (a different "model" for draft tests) ...
	perturb    float32                        // ... or, when > 0, only adds salt-seeded noise of this scale (a close "model")
	forwarded  atomic.Int64                   // tokens computed
	rows       atomic.Int64                   // logits rows computed
	cost       func(tokens int) time.Duration // when set, every Forward sleeps this long (a priced "model")
}

type fakeKV struct {
	mu    sync.Mutex
	ps    int
	slots [][]int64 // [page][slot] token<<32 | pos, -1 when unwritten
}

func (m *fakeModel) Info() ModelInfo                   { return ModelInfo{Vocab: m.vocab, ContextLen: m.ctx} }
func (m *fakeModel) KVBytesPerPage(pageSize int) int64 { return int64(pageSize) * 64 }

func (m *fakeModel) NewKV(pages, pageSize int) (KV, error) {
	kv := &fakeKV{ps: pageSize, slots: make([][]int64, pages)}
	for i := range kv.slots {
		kv.slots[i] = make([]int64, pageSize)
		for j := range kv.slots[i] {
			kv.slots[i][j] = -1
		}
	}
	return kv, nil
}

func (kv *fakeKV) CopyPage(dst, src int32) {
	kv.mu.Lock()
	copy(kv.slots[dst], kv.slots[src])
	kv.mu.Unlock()
}

func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 27
	x *= 0x94D049BB133111EB
	return x ^ x>>31
}

func (m *fakeModel) Forward(k KV, b *Batch, logits []float32) error {
	if m.gate != nil {
		<-m.gate
	}
	if m.cost != nil {
		time.Sleep(m.cost(len(b.Tokens)))
	}
	kv := k.(*fakeKV)
	kv.mu.Lock()
	defer kv.mu.Unlock()
	for i, tok := range b.Tokens {
		pages := b.Seqs[b.Seq[i]]
		p := int(b.Pos[i])
		if p/kv.ps >= len(pages) {
			return fmt.Errorf("fake: position %d beyond page table of %d pages", p, len(pages))
		}
		kv.slots[pages[p/kv.ps]][p%kv.ps] = int64(tok)<<32 | int64(p)
	}
	m.forwarded.Add(int64(len(b.Tokens)))
	m.rows.Add(int64(len(b.Logits)))
	for r, ti := range b.Logits {
		pages := b.Seqs[b.Seq[ti]]
		pos := int(b.Pos[ti])
		h := uint64(0x9E3779B97F4A7C15)
		if m.perturb == 0 {
			h ^= m.salt
		}
		for q := 0; q <= pos; q++ {
			v := kv.slots[pages[q/kv.ps]][q%kv.ps]
			if v < 0 || int(v&0xffffffff) != q {
				return fmt.Errorf("fake: position %d of a sequence holds %x", q, v)
			}
			h = mix(h ^ uint64(v>>32))
		}
		row := logits[r*m.vocab : (r+1)*m.vocab]
		for v := range row {
			row[v] = float32(mix(h^uint64(v)*0x9E3779B97F4A7C15)>>40) / float32(1<<24) * 8
		}
		if q := pos + 1 - m.echo; m.echo > 0 && q >= 0 {
			b := m.echoBonus
			if b == 0 {
				b = 5
			}
			row[kv.slots[pages[q/kv.ps]][q%kv.ps]>>32] += b
		}
		if m.perturb > 0 {
			for v := range row {
				row[v] += m.perturb * (float32(mix(h^m.salt^uint64(v)*0x51ED270B27A3C7F1)>>40)/float32(1<<24) - 0.5)
			}
		}
		row[0] -= 6 // EOS is rare ...
		if m.eosAt > 0 && pos >= m.eosAt {
			row[0] = 100 // ... unless forced
		}
	}
	return nil
}

// fakeTok: id 0 "<eos>" (end of generation), 1..26 'a'..'z', 27 ' ',
// 28.. two-letter pieces, so words span several tokens.
type fakeTok struct{ vocab int }

func (t fakeTok) piece(id int32) string {
	switch {
	case id == 0:
		return ""
	case id <= 26:
		return string(rune('a' + id - 1))
	case id == 27:
		return " "
	}
	a := (id - 28) % 26
	return string(rune('a'+a)) + string(rune('a'+(a+7)%26))
}

func (t fakeTok) Encode(text string, _ tokenizer.EncodeOptions) []int32 {
	var out []int32
	for _, c := range strings.ToLower(text) {
		if c >= 'a' && c <= 'z' {
			out = append(out, c-'a'+1)
		} else {
			out = append(out, 27)
		}
	}
	return out
}

func (t fakeTok) IsEOG(id int32) bool     { return id == 0 }
func (t fakeTok) NewDecoder(bool) Decoder { return &fakeDec{t: t} }
func (t fakeTok) text(ids []int32) string {
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(t.piece(id))
	}
	return sb.String()
}

type fakeDec struct{ t fakeTok }

func (d *fakeDec) Push(id int32) string { return d.t.piece(id) }
func (d *fakeDec) Flush() string        { return "" }
