package bench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	pb "oengine/proto/openengine/v1"
)

// SoakReport is everything a soak measured and checked.
type SoakReport struct {
	Config  SoakConfig `json:"config"`
	Elapsed float64    `json:"elapsed_s"`
	// Requests counts every request sent; Normal, Cancels and Stalls by
	// kind; Accepted those not refused before acceptance.
	Requests, Normal, Cancels, Stalls int
	Accepted, Rejected                int
	// StallsEnforced counts stalled readers whose stream ended CANCELLED
	// by the server (its consumer timeout).
	StallsEnforced int `json:"stalls_enforced"`
	// Ends counts requests by how they ended: kind:finish-reason,
	// kind:error:CODE, kind:client-cancel, kind:rejected, kind:status-CODE.
	Ends              map[string]int `json:"ends"`
	Violations        int            `json:"terminal_event_violations"`
	ViolationExamples []string       `json:"violation_examples,omitempty"`
	OutputTokens      int            `json:"output_tokens"`

	GoroutinesBefore float64 `json:"goroutines_before"`
	GoroutinesAfter  float64 `json:"goroutines_after"`
	PagesInUseAfter  float64 `json:"pages_in_use_after"`
	PagesPinnedAfter float64 `json:"pages_pinned_after"`
	UsedKVBlocks     uint64  `json:"used_kv_blocks_after"` // GetLoad
	RunningAfter     uint32  `json:"running_after"`
	QueuedAfter      uint32  `json:"queued_after"`
	RSSBefore        float64 `json:"rss_before_bytes"`
	RSSReference     float64 `json:"rss_reference_bytes"` // the sample at Config.RSSAt
	RSSReferenceAt   float64 `json:"rss_reference_at_s"`
	RSSAfter         float64 `json:"rss_after_bytes"`
	RSSRatio         float64 `json:"rss_after_over_reference"`
	SettledIn        float64 `json:"settled_in_s"`
	// Server holds the run's counter deltas and gauges from /metrics
	// (consumer timeouts, request outcomes).
	Server  map[string]float64 `json:"server_metrics,omitempty"`
	Samples []SoakSample       `json:"samples"`
	Checks  []SoakCheck        `json:"checks"`
	Passed  bool               `json:"passed"`
}

// SoakSample is one periodic reading of the server during a soak.
type SoakSample struct {
	T          float64 `json:"t_s"` // since the load started
	RSS        float64 `json:"rss_bytes"`
	Goroutines float64 `json:"goroutines"`
	PagesInUse float64 `json:"pages_in_use"`
	Pinned     float64 `json:"pages_pinned"`
	InFlight   int     `json:"client_in_flight"`
}

// SoakCheck is one pass/fail check of a soak.
type SoakCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// sumSeries sums the values of every series of metric name whose labels
// contain each of labels (e.g. `state="pinned"`); ok is false when none.
func sumSeries(m Metrics, name string, labels ...string) (float64, bool) {
	var sum float64
	found := false
	for k, v := range m.Values {
		if metricName(k) != name {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(k, l) {
				match = false
			}
		}
		if match {
			sum += v
			found = true
		}
	}
	return sum, found
}

func sampleOf(m Metrics, t time.Duration, inflight int) SoakSample {
	s := SoakSample{T: t.Seconds(), InFlight: inflight}
	s.RSS, _ = sumSeries(m, "process_resident_memory_bytes")
	s.Goroutines, _ = sumSeries(m, "go_goroutines")
	s.PagesInUse, _ = sumSeries(m, "oengine:kv_pages", `state="in_use"`)
	s.Pinned, _ = sumSeries(m, "oengine:kv_pages", `state="pinned"`)
	return s
}

// RunSoak runs a soak against the OpenEngine server at addr (gRPC) whose
// metrics are at cfg.MetricsURL. The error is for a run that could not be
// made; failed checks are in the report (Passed false).
func RunSoak(ctx context.Context, addr, model string, cfg SoakConfig, progress io.Writer) (*SoakReport, error) {
	if err := cfg.Fill(); err != nil {
		return nil, err
	}
	g, err := DialGRPC(addr, model)
	if err != nil {
		return nil, err
	}
	defer g.Close()
	stallConn, err := dialStalled(addr, model)
	if err != nil {
		return nil, err
	}
	defer stallConn.Close()
	sc := ServeConfig{Workload: cfg.Workload, InputMode: cfg.InputMode}
	p, err := prepare(ctx, g, &sc)
	if err != nil {
		return nil, err
	}
	cfg.Workload = sc.Workload
	// Warm both connections (and the metrics connection) so that the
	// goroutine baseline includes their server-side goroutines.
	warm := Request{Prompt: "warm up", MaxTokens: 1}
	for _, c := range []*GRPC{g, stallConn} {
		if r := c.Generate(ctx, warm); r.Err != "" {
			return nil, fmt.Errorf("bench: soak warm-up request: %s", r.Err)
		}
	}
	scr := NewScraper(cfg.MetricsURL)
	before, err := scr.Scrape(ctx)
	if err != nil {
		return nil, err
	}
	rep := &SoakReport{Config: cfg, Ends: map[string]int{}}
	rep.GoroutinesBefore, _ = sumSeries(before, "go_goroutines")
	rep.RSSBefore, _ = sumSeries(before, "process_resident_memory_bytes")
	led := &soakLedger{rep: rep}

	start := time.Now()
	stop := make(chan struct{})
	var swg sync.WaitGroup
	swg.Add(1)
	go func() {
		defer swg.Done()
		t := time.NewTicker(cfg.SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				m, err := scr.Scrape(ctx)
				if err != nil {
					continue
				}
				s := sampleOf(m, time.Since(start), led.inFlight())
				rep.Samples = append(rep.Samples, s) // only this goroutine appends until swg.Wait
				if progress != nil {
					fmt.Fprintf(progress, "soak %6.0fs: rss %.1f MiB, goroutines %.0f, pages in use %.0f, pinned %.0f, in flight %d\n",
						s.T, s.RSS/(1<<20), s.Goroutines, s.PagesInUse, s.Pinned, s.InFlight)
				}
			}
		}
	}()
	soakLoad(ctx, cfg, g, stallConn, p.maxContext, led)
	rep.Elapsed = time.Since(start).Seconds()
	close(stop)
	swg.Wait()

	after, err := settle(ctx, g, scr, cfg, rep)
	if err != nil {
		return rep, err
	}
	final := sampleOf(after, time.Since(start), 0)
	rep.Samples = append(rep.Samples, final)
	rep.GoroutinesAfter, rep.RSSAfter = final.Goroutines, final.RSS
	rep.PagesInUseAfter, rep.PagesPinnedAfter = final.PagesInUse, final.Pinned
	rep.Server = Figures(before, after, nil)
	for _, s := range rep.Samples {
		if s.T >= cfg.RSSAt.Seconds() {
			rep.RSSReference, rep.RSSReferenceAt = s.RSS, s.T
			break
		}
	}
	if rep.RSSReference > 0 {
		rep.RSSRatio = rep.RSSAfter / rep.RSSReference
	}
	rep.check(ctx)
	return rep, ctx.Err()
}

// settle waits (at most cfg.Settle) until the server is idle: nothing
// running or queued, no page in use or pinned, goroutines back within the
// slack of the baseline. It returns the last scrape.
func settle(ctx context.Context, g *GRPC, scr *Scraper, cfg SoakConfig, rep *SoakReport) (Metrics, error) {
	t0 := time.Now()
	var last Metrics
	for {
		m, err := scr.Scrape(ctx)
		if err != nil {
			return last, err
		}
		last = m
		li, err := g.ctl.GetLoad(ctx, &pb.GetLoadRequest{})
		if err != nil {
			return last, fmt.Errorf("bench: soak: GetLoad: %w", err)
		}
		rep.UsedKVBlocks, rep.RunningAfter, rep.QueuedAfter = li.GetUsedKvBlocks(), li.GetRunningRequests(), li.GetQueuedRequests()
		s := sampleOf(m, 0, 0)
		idle := rep.UsedKVBlocks == 0 && rep.RunningAfter == 0 && rep.QueuedAfter == 0 && s.PagesInUse == 0 && s.Pinned == 0 &&
			s.Goroutines <= rep.GoroutinesBefore+float64(cfg.GoroutineSlack)
		rep.SettledIn = time.Since(t0).Seconds()
		if idle || time.Since(t0) >= cfg.Settle {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// check fills Checks and Passed.
func (r *SoakReport) check(ctx context.Context) {
	add := func(name string, ok bool, format string, args ...any) {
		r.Checks = append(r.Checks, SoakCheck{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}
	add("load", r.Accepted > 0, "%d requests sent, %d accepted, %d rejected before acceptance", r.Requests, r.Accepted, r.Rejected)
	add("one terminal event", r.Violations == 0, "%d of %d accepted requests broke the rule", r.Violations, r.Accepted)
	if r.Config.StallFraction > 0 {
		add("stalled readers cancelled by the server", r.Stalls > 0 && r.StallsEnforced == r.Stalls,
			"%d of %d stalled readers ended CANCELLED by the server (server consumer timeouts: %s)",
			r.StallsEnforced, r.Stalls, figure(r.Server, "oengine:consumer_timeouts_total"))
	}
	if r.Config.CancelFraction > 0 {
		add("client cancels", r.Cancels > 0, "%d requests cancelled by the client", r.Cancels)
	}
	add("no page in use or pinned", r.UsedKVBlocks == 0 && r.PagesInUseAfter == 0 && r.PagesPinnedAfter == 0,
		"GetLoad used_kv_blocks %d; /metrics pages in_use %.0f, pinned %.0f; running %d, queued %d (settled in %.1fs)",
		r.UsedKVBlocks, r.PagesInUseAfter, r.PagesPinnedAfter, r.RunningAfter, r.QueuedAfter, r.SettledIn)
	add("goroutines at baseline", r.GoroutinesBefore > 0 && r.GoroutinesAfter <= r.GoroutinesBefore+float64(r.Config.GoroutineSlack),
		"%.0f before, %.0f after (slack %d)", r.GoroutinesBefore, r.GoroutinesAfter, r.Config.GoroutineSlack)
	add("RSS", r.RSSReference > 0 && r.RSSAfter <= r.RSSReference*(1+r.Config.RSSTolerance),
		"%.1f MiB at %.0fs, %.1f MiB after (x%.3f, limit x%.2f)", r.RSSReference/(1<<20), r.RSSReferenceAt,
		r.RSSAfter/(1<<20), r.RSSRatio, 1+r.Config.RSSTolerance)
	if ctx.Err() != nil {
		add("completed", false, "interrupted: %v", ctx.Err())
	}
	r.Passed = true
	for _, c := range r.Checks {
		r.Passed = r.Passed && c.OK
	}
}

// figure prints the summed series of name from a Figures map, or "n/a".
func figure(figs map[string]float64, name string) string {
	var sum float64
	found := false
	for k, v := range figs {
		if strings.HasPrefix(k, name) {
			sum += v
			found = true
		}
	}
	if !found {
		return "n/a"
	}
	return fmt.Sprintf("%.0f", sum)
}

// WriteSoak prints a soak's counts and checks.
func WriteSoak(w io.Writer, r *SoakReport) {
	fmt.Fprintf(w, "soak: %.0fs at concurrency %d: %d requests (%d normal, %d cancelled by the client, %d stalled readers), %d accepted, %d rejected, %d output tokens\n",
		r.Elapsed, r.Config.Concurrency, r.Requests, r.Normal, r.Cancels, r.Stalls, r.Accepted, r.Rejected, r.OutputTokens)
	for _, k := range sortedKeys(toStrings(r.Ends)) {
		fmt.Fprintf(w, "  %-36s %d\n", k, r.Ends[k])
	}
	for _, v := range r.ViolationExamples {
		fmt.Fprintf(w, "  violation: %s\n", v)
	}
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "%s %-40s %s\n", mark, c.Name, c.Detail)
	}
}

func toStrings(m map[string]int) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}
