package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Metrics is one scrape of a Prometheus text endpoint: value by series
// ("name" or "name{labels}" as written), and the TYPE of each name.
type Metrics struct {
	Values map[string]float64
	Types  map[string]string
}

// ParseMetrics reads the Prometheus text exposition format. Lines it does
// not understand are skipped.
func ParseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{Values: map[string]float64{}, Types: map[string]string{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			f := strings.Fields(line)
			if len(f) >= 4 && f[1] == "TYPE" {
				m.Types[f[2]] = f[3]
			}
			continue
		}
		// series value [timestamp]; labels may hold spaces inside quotes.
		end := strings.LastIndexByte(line, '}')
		rest := line
		series := ""
		if end >= 0 {
			series, rest = line[:end+1], line[end+1:]
		} else {
			sp := strings.IndexAny(line, " \t")
			if sp < 0 {
				continue
			}
			series, rest = line[:sp], line[sp:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		m.Values[series] = v
	}
	return m, sc.Err()
}

// metricName is the name part of a series.
func metricName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// ServerFigures are the series a report keeps: KV usage, preemptions,
// prefix-cache figures, token counters, running/waiting requests, for
// oengine (oengine:...), vLLM (vllm:...) and llama.cpp (llamacpp:...).
var ServerFigures = []string{"kv_cache_usage", "kv_pages", "preemption", "prefix_cache", "prompt_tokens",
	"generation_tokens", "tokens_predicted", "num_requests", "requests_processing", "requests_deferred", "request_success", "request_failure", "request_rejected",
	"request_pauses", "consumer_timeouts"}

func wanted(name string) bool {
	if strings.HasSuffix(name, "_bucket") || strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count") {
		return false
	}
	for _, w := range ServerFigures {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// Scraper reads a /metrics endpoint before, during (every Every) and
// after a run.
type Scraper struct {
	URL    string
	Every  time.Duration
	client *http.Client

	mu     sync.Mutex // protects before, peak, last
	before Metrics
	peak   map[string]float64
	stop   chan struct{}
	wg     sync.WaitGroup
}

// NewScraper returns a scraper of url (e.g. http://host:8080/metrics).
func NewScraper(url string) *Scraper {
	return &Scraper{URL: url, Every: time.Second, client: &http.Client{Timeout: 5 * time.Second}}
}

// Scrape fetches the endpoint once.
func (s *Scraper) Scrape(ctx context.Context) (Metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return Metrics{}, fmt.Errorf("bench: metrics: %w", err)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return Metrics{}, fmt.Errorf("bench: metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Metrics{}, fmt.Errorf("bench: metrics: %s: HTTP %d", s.URL, resp.StatusCode)
	}
	return ParseMetrics(resp.Body)
}

// Start takes the "before" scrape and samples gauges until Finish.
func (s *Scraper) Start(ctx context.Context) error {
	m, err := s.Scrape(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.before, s.peak = m, map[string]float64{}
	s.mu.Unlock()
	s.stop = make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(s.Every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
				if m, err := s.Scrape(ctx); err == nil {
					s.observe(m)
				}
			}
		}
	}()
	return nil
}

func (s *Scraper) observe(m Metrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range m.Values {
		if !wanted(metricName(k)) || m.Types[metricName(k)] == "counter" {
			continue
		}
		if p, ok := s.peak[k]; !ok || v > p {
			s.peak[k] = v
		}
	}
}

// Finish takes the "after" scrape and returns the figures: counters as
// the change over the run (suffix ":delta"), gauges as their value after
// the run and their peak during it (":after", ":peak").
func (s *Scraper) Finish(ctx context.Context) (map[string]float64, error) {
	if s.stop != nil {
		close(s.stop)
		s.wg.Wait()
		s.stop = nil
	}
	after, err := s.Scrape(ctx)
	if err != nil {
		return nil, err
	}
	s.observe(after)
	s.mu.Lock()
	defer s.mu.Unlock()
	return Figures(s.before, after, s.peak), nil
}

// Figures computes the report's server figures from two scrapes and the
// gauges' peaks.
func Figures(before, after Metrics, peak map[string]float64) map[string]float64 {
	out := map[string]float64{}
	keys := make([]string, 0, len(after.Values))
	for k := range after.Values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		name := metricName(k)
		if !wanted(name) {
			continue
		}
		v := after.Values[k]
		if after.Types[name] == "counter" || strings.HasSuffix(name, "_total") {
			out[k+":delta"] = v - before.Values[k]
			continue
		}
		out[k+":after"] = v
		if p, ok := peak[k]; ok {
			out[k+":peak"] = p
		}
	}
	return out
}
