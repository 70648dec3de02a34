package gpu

import (
	"fmt"
	"sync"

	"oengine/kernels/cuda"
)

// KV is a paged K/V store in device memory: per layer, K and V caches of
// pages*pageSize rows, each row [KVHeads*HeadDim] F16 (row = page*pageSize
// + position%pageSize). kvcache hands out the page ids; a KV knows only
// rows.
type KV struct {
	m               *Decoder
	pages, pageSize int
	kc, vc          []cuda.DevPtr // per layer

	mu  sync.Mutex // protects err
	err error      // the first failed CopyPage, returned by the next Forward
}

// NewKV allocates a store of pages pages of pageSize positions.
func (m *Decoder) NewKV(pages, pageSize int) (*KV, error) {
	if pages <= 0 || pageSize <= 0 {
		return nil, fmt.Errorf("gpu: KV of %d pages of %d positions", pages, pageSize)
	}
	c := m.cfg
	kv := &KV{m: m, pages: pages, pageSize: pageSize}
	bytes := uint64(pages) * uint64(pageSize) * uint64(c.KVHeads*c.HeadDim) * 2
	err := m.dev.Do(func(s *cuda.Stream) error {
		for range m.layers {
			for _, dst := range []*[]cuda.DevPtr{&kv.kc, &kv.vc} {
				p, err := s.Alloc(bytes)
				if err != nil {
					return fmt.Errorf("gpu: KV cache of %d pages: %w", pages, err)
				}
				*dst = append(*dst, p)
			}
		}
		return nil
	})
	if err != nil {
		kv.Close()
		return nil, err
	}
	return kv, nil
}

// Pages returns the number of pages.
func (kv *KV) Pages() int { return kv.pages }

// PageSize returns the positions per page.
func (kv *KV) PageSize() int { return kv.pageSize }

// pageBytes is the size of one page of one layer's K (or V) cache.
func (kv *KV) pageBytes() uint64 {
	return uint64(kv.pageSize) * uint64(kv.m.cfg.KVHeads*kv.m.cfg.HeadDim) * 2
}

// CopyPage copies page src to page dst in every layer's K and V caches on
// the device (a copy-on-write fork of a shared page). A failure is kept
// and returned by the next Forward, which must not read a half-copied page.
func (kv *KV) CopyPage(dst, src int32) {
	if err := kv.copyPage(dst, src); err != nil {
		kv.mu.Lock()
		if kv.err == nil {
			kv.err = err
		}
		kv.mu.Unlock()
	}
}

func (kv *KV) copyPage(dst, src int32) error {
	if dst < 0 || src < 0 || int(dst) >= kv.pages || int(src) >= kv.pages {
		return fmt.Errorf("gpu: copy page %d to %d outside [0, %d)", src, dst, kv.pages)
	}
	if dst == src {
		return nil
	}
	n := kv.pageBytes()
	od, os := cuda.DevPtr(uint64(dst)*n), cuda.DevPtr(uint64(src)*n)
	return kv.m.dev.Do(func(s *cuda.Stream) error {
		for i := range kv.kc {
			if err := s.Copy(kv.kc[i]+od, kv.kc[i]+os, n); err != nil {
				return err
			}
			if err := s.Copy(kv.vc[i]+od, kv.vc[i]+os, n); err != nil {
				return err
			}
		}
		return nil
	})
}

// takeErr returns and clears the kept CopyPage failure.
func (kv *KV) takeErr() error {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	err := kv.err
	kv.err = nil
	return err
}

// Close frees the device memory (safe to call twice).
func (kv *KV) Close() {
	kc, vc := kv.kc, kv.vc
	kv.kc, kv.vc = nil, nil
	if len(kc)+len(vc) == 0 {
		return
	}
	kv.m.dev.Do(func(s *cuda.Stream) error {
		for _, p := range append(kc, vc...) {
			s.Free(p)
		}
		return nil
	})
}
