package kvcache

import (
	"testing"
)

func benchCache(b *testing.B, pages int) *Cache {
	b.Helper()
	c, err := New(Config{NumPages: pages, EventWindow: -1})
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkMatchHit: Match of a 2048-token prompt fully cached (128 pages).
func BenchmarkMatchHit(b *testing.B) {
	c := benchCache(b, 4096)
	p := seq(1, 2048)
	t := c.NewTable(Namespace{})
	if _, err := c.PrepareAppend(t, len(p)); err != nil {
		b.Fatal(err)
	}
	if err := c.Commit(t, p); err != nil {
		b.Fatal(err)
	}
	c.Release(t)
	b.SetBytes(int64(len(p)) * 4)
	b.ReportAllocs()
	for b.Loop() {
		m, n := c.Match(p, Namespace{}, -1)
		if n != len(p) {
			b.Fatalf("cached %d", n)
		}
		c.Release(m)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(p)/16), "ns/page")
}

// BenchmarkMatchMiss: Match of a 2048-token prompt with nothing cached
// (hashes the first page only).
func BenchmarkMatchMiss(b *testing.B) {
	c := benchCache(b, 256)
	p := seq(1, 2048)
	b.ReportAllocs()
	for b.Loop() {
		m, _ := c.Match(p, Namespace{}, -1)
		c.Release(m)
	}
}

// BenchmarkPrefillCommit: a 2048-token prompt reserved in one step and
// committed (128 new blocks into the index, events on), then released;
// the next iteration's allocation evicts them.
func BenchmarkPrefillCommit(b *testing.B) {
	c, err := New(Config{NumPages: 160})
	if err != nil {
		b.Fatal(err)
	}
	p := seq(1, 2048)
	sub, _ := c.Subscribe(0, false)
	defer sub.Close()
	b.SetBytes(int64(len(p)) * 4)
	b.ReportAllocs()
	i := int32(0)
	for b.Loop() {
		i++
		p[0] = i // a new prompt each time
		t := c.NewTable(Namespace{})
		if _, err := c.PrepareAppend(t, len(p)); err != nil {
			b.Fatal(err)
		}
		if err := c.Commit(t, p); err != nil {
			b.Fatal(err)
		}
		c.Release(t)
		drain(sub)
	}
}

// BenchmarkDecodeAppend: one token appended per sequence per step for 64
// sequences (the decode path: PrepareAppend + Commit per token).
func BenchmarkDecodeAppend(b *testing.B) {
	const seqs, steps = 64, 256
	c := benchCache(b, seqs*(steps/16+2))
	toks := make([][]int32, seqs)
	b.ReportAllocs()
	for b.Loop() {
		tables := make([]*Table, seqs)
		for s := range tables {
			tables[s] = c.NewTable(Namespace{})
			toks[s] = toks[s][:0]
		}
		for step := range steps {
			for s, t := range tables {
				if _, err := c.PrepareAppend(t, 1); err != nil {
					b.Fatal(err)
				}
				toks[s] = append(toks[s], int32(step*seqs+s))
				if err := c.Commit(t, toks[s]); err != nil {
					b.Fatal(err)
				}
			}
		}
		for _, t := range tables {
			c.Release(t)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*seqs*steps), "ns/token")
}

// BenchmarkForkRelease: n=4 forks of a 1024-token table and their release.
func BenchmarkForkRelease(b *testing.B) {
	c := benchCache(b, 512)
	t := c.NewTable(Namespace{})
	if _, err := c.PrepareAppend(t, 1000); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for range 4 {
			f, _ := c.Fork(t)
			if _, err := c.PrepareAppend(f, 1); err != nil { // copy-on-write
				b.Fatal(err)
			}
			c.Release(f)
		}
	}
}

// BenchmarkCheckIntegrity on a pool of 16k pages, half in use.
func BenchmarkCheckIntegrity(b *testing.B) {
	c := benchCache(b, 16384)
	for i := range 64 {
		t := c.NewTable(Namespace{})
		if _, err := c.PrepareAppend(t, 2048); err != nil {
			b.Fatal(err)
		}
		_ = c.Commit(t, seq(i*10000, 2048))
	}
	for b.Loop() {
		if err := c.CheckIntegrity(); err != nil {
			b.Fatal(err)
		}
	}
}
