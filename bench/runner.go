package bench

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"
)

// Load says how jobs are started: at a fixed concurrency (Rate == 0), or
// at Rate jobs per second (Poisson arrivals or constant spacing), with at
// most Concurrency in flight when Concurrency > 0. A run stops by itself:
// after Requests jobs, or when Duration has passed (then no new job starts
// and those in flight finish), whichever comes first. At least one of the
// two bounds must be set.
type Load struct {
	Concurrency int           `json:"concurrency,omitempty"`
	Rate        float64       `json:"rate,omitempty"`
	Poisson     bool          `json:"poisson,omitempty"`
	Requests    int           `json:"requests,omitempty"`
	Duration    time.Duration `json:"duration_ns,omitempty"`
	Seed        uint64        `json:"seed"`
}

// ErrUnbounded is returned for a load with neither a request count nor a
// duration.
var ErrUnbounded = errors.New("bench: a run needs a request count or a duration")

// Job runs one unit of work (a request, or a whole conversation) and
// returns what it measured.
type Job func(ctx context.Context, i int) []Result

// Progress receives the number of finished jobs and the total (0 when the
// run is bounded by time only) as they finish.
type Progress func(done, total int)

// Run starts jobs as l says until its bound and returns every result and
// the wall time from the first start to the last finish. Cancelling ctx
// stops the run early (in-flight jobs see ctx cancelled).
func Run(ctx context.Context, l Load, job Job, progress Progress) ([]Result, time.Duration, error) {
	if l.Requests <= 0 && l.Duration <= 0 {
		return nil, 0, ErrUnbounded
	}
	if l.Rate <= 0 && l.Concurrency <= 0 {
		l.Concurrency = 1
	}
	var (
		mu      sync.Mutex // protects results and done
		results []Result
		done    int
		wg      sync.WaitGroup
	)
	var slots chan struct{}
	if l.Concurrency > 0 {
		slots = make(chan struct{}, l.Concurrency)
	}
	rng := rand.New(rand.NewPCG(l.Seed, 0x72617465))
	start := time.Now()
	var stop <-chan time.Time
	if l.Duration > 0 {
		t := time.NewTimer(l.Duration)
		defer t.Stop()
		stop = t.C
	}
	next := start
loop:
	for i := 0; l.Requests <= 0 || i < l.Requests; i++ {
		if l.Rate > 0 && i > 0 {
			gap := 1 / l.Rate
			if l.Poisson {
				gap = rng.ExpFloat64() / l.Rate
			}
			next = next.Add(time.Duration(gap * float64(time.Second)))
			if d := time.Until(next); d > 0 {
				t := time.NewTimer(d)
				select {
				case <-t.C:
				case <-stop:
					t.Stop()
					break loop
				case <-ctx.Done():
					t.Stop()
					break loop
				}
			}
		}
		if slots != nil {
			select {
			case slots <- struct{}{}:
			case <-stop:
				break loop
			case <-ctx.Done():
				break loop
			}
		}
		select {
		case <-stop:
			if slots != nil {
				<-slots
			}
			break loop
		case <-ctx.Done():
			if slots != nil {
				<-slots
			}
			break loop
		default:
		}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			rs := job(ctx, i)
			mu.Lock()
			results = append(results, rs...)
			done++
			d := done
			mu.Unlock()
			if slots != nil {
				<-slots
			}
			if progress != nil {
				progress(d, max(l.Requests, 0))
			}
		}(i)
	}
	wg.Wait()
	elapsed := time.Since(start)
	return results, elapsed, ctx.Err()
}
