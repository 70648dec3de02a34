package kvcache

import (
	"errors"
	"testing"
)

// TestCheckIntegrityDetects corrupts one fact at a time and expects the
// checker to notice: the other tests rely on it.
func TestCheckIntegrityDetects(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(c *Cache, tb *Table)
	}{
		{"refcount", func(c *Cache, tb *Table) { c.pages[tb.pages[0]].refs++ }},
		{"pin count", func(c *Cache, tb *Table) { c.pages[tb.pages[0]].pins++ }},
		{"state", func(c *Cache, tb *Table) { c.pages[tb.pages[0]].state = stateFree }},
		{"counter", func(c *Cache, tb *Table) { c.count[stateFree]-- }},
		{"index entry", func(c *Cache, tb *Table) { c.index[12345] = tb.pages[0] }},
		{"unindexed page", func(c *Cache, tb *Table) { delete(c.index, c.pages[tb.pages[0]].hash) }},
		{"lru link", func(c *Cache, tb *Table) { c.pages[c.lru.head].prev = 3 }},
		{"free list length", func(c *Cache, tb *Table) { c.free.n++ }},
		{"table pages", func(c *Cache, tb *Table) { tb.n += c.pageSize }},
		{"duplicate page in table", func(c *Cache, tb *Table) { tb.pages[1] = tb.pages[0] }},
		{"table hash", func(c *Cache, tb *Table) { tb.hashes[0]++ }},
		{"pin set", func(c *Cache, tb *Table) { c.owners["o"].order = append(c.owners["o"].order, 5) }},
		{"staged event", func(c *Cache, tb *Table) { c.ev.stage(Event{Kind: BlockRemoved}) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSim(t, Config{NumPages: 16, PageSize: 2})
			old, _ := s.run(seq(100, 5), Namespace{}) // cached pages for the LRU
			s.c.Release(old)
			tb, _ := s.run(seq(1, 5), Namespace{})
			if err := s.c.Pin("o", tb); err != nil {
				t.Fatal(err)
			}
			s.check()
			s.c.mu.Lock()
			tc.corrupt(s.c, tb)
			s.c.mu.Unlock()
			err := s.c.CheckIntegrity()
			if !errors.Is(err, ErrIntegrity) {
				t.Fatalf("corruption not detected: %v", err)
			}
			t.Log(err)
		})
	}
}
