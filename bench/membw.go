package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"oengine/kernels/cpu"
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
// at least 256 MiB) with the same AVX2 streaming loop the decode kernels
// use (cpu.ReadSum), reps times; the best repetition is reported, as
// STREAM-like tools do.
func MemBW(threads, reps int) MemBWResult {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	reps = max(reps, 1)
	llc := LastLevelCache()
	size := max(4*llc, 256<<20) &^ 4095
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 { // fault every page in before timing
		buf[i] = byte(i >> 12)
	}
	res := MemBWResult{BufferBytes: size, LLCBytes: llc, Threads: threads, Reps: reps}
	sinks := make([]uint64, threads)
	for range reps {
		var wg sync.WaitGroup
		start := time.Now()
		for t := range threads {
			lo, hi := t*len(buf)/threads&^127, (t+1)*len(buf)/threads&^127
			wg.Go(func() { sinks[t] += cpu.ReadSum(buf[lo:hi]) })
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
