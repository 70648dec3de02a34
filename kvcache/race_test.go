package kvcache

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

// TestConcurrentReaders runs the scheduler-like walk on the test goroutine
// while other goroutines read stats, check integrity, subscribe with
// snapshots and read a table that the walk keeps growing. Meant for -race;
// it also checks the readers saw consistent ledgers.
func TestConcurrentReaders(t *testing.T) {
	steps := 3000
	if testing.Short() {
		steps = 800
	}
	rng := rand.New(rand.NewPCG(7, 7))
	w := newWalker(t, rng.IntN, Config{NumPages: 64, PageSize: 4, MaxPinnedPages: 24, SubscriberBuffer: 64})
	shared := w.c.NewTable(Namespace{Salt: "shared"})

	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	wg.Add(4)
	go func() { // metrics scraper
		defer wg.Done()
		for !stop.Load() {
			st := w.c.Stats()
			if st.Free+st.Cached+st.InUse+st.Pinned != st.Total {
				report(errors.New("inconsistent Stats snapshot"))
				return
			}
			_ = w.c.Available()
			_ = w.c.PinnedPages("s1")
		}
	}()
	go func() { // debug integrity checker
		defer wg.Done()
		for !stop.Load() {
			if err := w.c.CheckIntegrity(); err != nil {
				report(err)
				return
			}
		}
	}()
	go func() { // event subscribers coming and going
		defer wg.Done()
		for !stop.Load() {
			sub, err := w.c.Subscribe(0, true)
			if err != nil {
				report(err)
				return
			}
			for range 3 {
				select {
				case <-sub.C():
				default:
				}
			}
			sub.Close()
		}
	}()
	go func() { // a session reading its table
		defer wg.Done()
		for !stop.Load() {
			if p, n := shared.Pages(), shared.Len(); len(p) > 0 && n == 0 {
				report(errors.New("pages without tokens"))
				return
			}
		}
	}()
	for i := range steps {
		w.step()
		if i%50 == 0 {
			if _, err := w.c.PrepareAppend(shared, 1); err != nil && !errors.Is(err, ErrNoPages) {
				t.Fatal(err)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	w.c.Release(shared)
	w.finish()
}
