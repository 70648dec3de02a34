package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// LastLevelCache returns the size in bytes of CPU 0's largest cache as
// Linux reports it (/sys/devices/system/cpu/cpu0/cache/index*/size), or 0
// when it cannot be read.
func LastLevelCache() int64 {
	var best int64
	for i := range 8 {
		b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index" + strconv.Itoa(i) + "/size")
		if err != nil {
			continue
		}
		if n := parseCacheSize(string(b)); n > best {
			best = n
		}
	}
	return best
}

// parseCacheSize reads sysfs cache sizes such as "32768K", "512K", "8M".
func parseCacheSize(s string) int64 {
	s = strings.TrimSpace(s)
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n * mult
}

// MemBWResult is a read-bandwidth measurement.
type MemBWResult struct {
	GBps        float64 `json:"gbps"` // best of the repetitions, 1e9 bytes/s
	BufferBytes int64   `json:"buffer_bytes"`
	LLCBytes    int64   `json:"llc_bytes"`
	Threads     int     `json:"threads"`
	Reps        int     `json:"reps"`
}

// MemBW measures multi-threaded read bandwidth: threads goroutines each
// read their share of a buffer of at least 4x the last-level cache (and
// at least 64 MiB), reps times; the best repetition is reported, as
// STREAM-like tools do.
func MemBW(threads, reps int) MemBWResult {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	reps = max(reps, 1)
	llc := LastLevelCache()
	size := max(4*llc, 64<<20)
	buf := make([]uint64, size/8)
	for i := range buf { // fault every page in before timing
		buf[i] = uint64(i)
	}
	res := MemBWResult{BufferBytes: size, LLCBytes: llc, Threads: threads, Reps: reps}
	sinks := make([]uint64, threads)
	for range reps {
		var wg sync.WaitGroup
		start := time.Now()
		for t := range threads {
			lo, hi := t*len(buf)/threads, (t+1)*len(buf)/threads
			wg.Go(func() { sinks[t] += sumWords(buf[lo:hi]) })
		}
		wg.Wait()
		el := time.Since(start).Seconds()
		if gb := float64(size) / el / 1e9; gb > res.GBps {
			res.GBps = gb
		}
	}
	runtime.KeepAlive(sinks)
	return res
}

// sumWords adds the words of b with eight independent accumulators so the
// loop is bound by loads, not by the add chain. sumWordsRef is its plain
// twin.
func sumWords(b []uint64) uint64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 uint64
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := b[i : i+8 : i+8]
		s0 += w[0]
		s1 += w[1]
		s2 += w[2]
		s3 += w[3]
		s4 += w[4]
		s5 += w[5]
		s6 += w[6]
		s7 += w[7]
	}
	for ; i < len(b); i++ {
		s0 += b[i]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}

func sumWordsRef(b []uint64) uint64 {
	var s uint64
	for _, w := range b {
		s += w
	}
	return s
}
