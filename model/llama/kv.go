package llama

import (
	"errors"
	"fmt"
	"math"

	"oengine/kernels/cpu"
)

// KVType is the element type of the K/V store.
type KVType int

const (
	KVF16 KVType = iota // IEEE half, rounded to nearest even on store (llama.cpp's default)
	KVF32               // float32
)

// String returns "f16" or "f32".
func (t KVType) String() string {
	switch t {
	case KVF16:
		return "f16"
	case KVF32:
		return "f32"
	}
	return fmt.Sprintf("KVType(%d)", int(t))
}

// bytes returns the size of one element.
func (t KVType) bytes() int64 {
	if t == KVF32 {
		return 4
	}
	return 2
}

// KV is the paged K/V store of one model: for each layer, K and V of shape
// [pages][pageSize][KVHeads*HeadDim] (row-major; a row is one token's K or V
// for all KV heads, head-major). Page ids come from the caller (package
// kvcache); the model only reads and writes the pages a Batch names.
//
// A KV is not safe for concurrent use; Forward calls on one model are
// serialized, which covers its use there.
type KV struct {
	owner    *Model // the model that made it; Forward refuses others
	typ      KVType
	pages    int
	pageSize int
	stride   int // KVHeads*HeadDim
	k, v     []cpu.KVRows
}

// KVBytesPerPage returns the memory one page of pageSize tokens takes over
// all layers (kvLayers), K and V.
func (m *Model) KVBytesPerPage(pageSize int, t KVType) int64 {
	return int64(pageSize) * int64(m.cfg.KVDim()) * int64(m.kvLayers()) * 2 * t.bytes()
}

// kvLayers is the layers a page holds K/V for: every layer of a decoder;
// one for an encoder, whose forward pass is done with a layer's K/V (its
// whole input attended to) before the next layer writes its own over
// them (encoder.go).
func (m *Model) kvLayers() int {
	if m.cfg.Encoder {
		return 1
	}
	return m.cfg.Layers
}

// NewKV allocates a store of pages pages of pageSize tokens each.
func (m *Model) NewKV(pages, pageSize int, t KVType) (*KV, error) {
	if t != KVF16 && t != KVF32 {
		return nil, fmt.Errorf("llama: unknown KV type %d", int(t))
	}
	if pages <= 0 || pageSize <= 0 {
		return nil, fmt.Errorf("llama: KV needs pages > 0 and page size > 0 (got %d, %d)", pages, pageSize)
	}
	stride := m.cfg.KVDim()
	rowBytes := int64(stride) * int64(m.kvLayers()) * 2 * t.bytes()
	if int64(pages) > math.MaxInt64/int64(pageSize)/rowBytes {
		return nil, errors.New("llama: KV store too large")
	}
	perLayer := pages * pageSize * stride
	kv := &KV{owner: m, typ: t, pages: pages, pageSize: pageSize, stride: stride,
		k: make([]cpu.KVRows, m.kvLayers()), v: make([]cpu.KVRows, m.kvLayers())}
	for l := range kv.k {
		for _, rows := range []*cpu.KVRows{&kv.k[l], &kv.v[l]} {
			rows.PageSize, rows.Stride = pageSize, stride
			if t == KVF16 {
				rows.F16 = make([]uint16, perLayer)
			} else {
				rows.F32 = make([]float32, perLayer)
			}
		}
	}
	return kv, nil
}

// PageSize returns the tokens per page.
func (kv *KV) PageSize() int { return kv.pageSize }

// Pages returns the number of pages.
func (kv *KV) Pages() int { return kv.pages }

// Type returns the element type.
func (kv *KV) Type() KVType { return kv.typ }

// CopyPage copies page src over page dst in every layer (K and V), for
// copy-on-write of a shared prefix page. Page ids out of range are a
// programming error and panic.
func (kv *KV) CopyPage(dst, src int32) {
	if dst < 0 || src < 0 || int(dst) >= kv.pages || int(src) >= kv.pages {
		panic(fmt.Sprintf("llama: CopyPage(%d, %d) outside %d pages", dst, src, kv.pages))
	}
	if dst == src {
		return
	}
	n := kv.pageSize * kv.stride
	d, s := int(dst)*n, int(src)*n
	for l := range kv.k {
		for _, rows := range []cpu.KVRows{kv.k[l], kv.v[l]} {
			if rows.F16 != nil {
				copy(rows.F16[d:d+n], rows.F16[s:s+n])
			} else {
				copy(rows.F32[d:d+n], rows.F32[s:s+n])
			}
		}
	}
}

// store writes one token's K and V rows (stride values each) of layer l at
// row r of page p, rounding to F16 for an F16 store.
func (kv *KV) store(l int, p int32, r int, k, v []float32) {
	i := (int(p)*kv.pageSize + r) * kv.stride
	kr, vr := kv.k[l], kv.v[l]
	if kr.F16 != nil {
		cpu.StoreRowF16(kr.F16[i:i+kv.stride], k)
		cpu.StoreRowF16(vr.F16[i:i+kv.stride], v)
		return
	}
	copy(kr.F32[i:i+kv.stride], k)
	copy(vr.F32[i:i+kv.stride], v)
}
