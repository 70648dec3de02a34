package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"oengine/scheduler"
)

// A closed-loop serving run in virtual time, for the step-latency policy
// alone: clients each send a prompt of 64-2048 tokens, wait for 64 output
// tokens, and send the next. Steps are planned like the scheduler's (every
// decoder one token first, then prompt chunks in arrival order under the
// 512-token budget and, when decode tokens are planned, under
// stepCost.prefillLimit) and priced by a compute-bound cost like a small
// model's on a 2-core CPU, where a decode-only step grows with the
// decoders (docs/performance.md "Step latency"). No time passes: the
// durations are the model's, with ±2.5% noise.

// simDecodeSecs: 1 ms per step, 4 ms per decode token, attention 1.1 µs
// per key; simChunkSecs: 0.9 ms per prompt token, same attention.
func simDecodeSecs(w scheduler.Work) float64 {
	return 0.001 + 0.004*float64(w.Tokens) + 1.1e-6*float64(w.Keys)
}

func simChunkSecs(w scheduler.Work) float64 {
	return 0.0009*float64(w.Tokens) + 1.1e-6*float64(w.Keys)
}

type simClient struct {
	prompt, done int // prompt tokens; of them computed
	out          int // output tokens so far
	sent         float64
}

type simResult struct {
	itl, ttft []float64 // seconds
	outTokens int
	elapsed   float64
}

// simServe runs requests through clients at once under the step target
// (as Config.MaxStepLatency: 0 auto, < 0 off) and returns every decode
// interval, every time to first token, and the output tokens over the
// virtual time taken.
func simServe(target time.Duration, clients, requests int, seed uint64) simResult {
	prompts := rand.New(rand.NewPCG(seed, 99)) // the same requests whatever the policy
	noise := rand.New(rand.NewPCG(seed, 98))
	c := newStepCost(target, scheduler.DefaultMaxBatchedTokens)
	const outLen = 64
	var res simResult
	now, sent := 0.0, 0
	var active []*simClient
	send := func() {
		if sent < requests {
			active = append(active, &simClient{prompt: 64 + prompts.IntN(2048-64+1), sent: now})
			sent++
		}
	}
	for range clients {
		send()
	}
	for len(active) > 0 {
		var decode, prefill scheduler.Work
		var decoders, waiting []*simClient
		for _, s := range active {
			if s.done == s.prompt {
				decoders = append(decoders, s)
				decode = decode.Add(scheduler.ChunkWork(s.prompt+s.out-1, 1))
			} else {
				waiting = append(waiting, s)
			}
		}
		budget := scheduler.DefaultMaxBatchedTokens - len(decoders)
		var take func(start, n int) int
		if len(decoders) > 0 {
			take = c.prefillLimit(scheduler.StepLoad{Decode: decode, Decoding: len(decoders), Prompts: len(waiting)})
		}
		var finished []*simClient // prompts whose last chunk ran: first token
		for _, s := range waiting {
			n := min(s.prompt-s.done, budget)
			if take != nil && n > 0 {
				n = take(s.done, n)
			}
			if n <= 0 {
				break
			}
			prefill = prefill.Add(scheduler.ChunkWork(s.done, n))
			s.done += n
			budget -= n
			if s.done == s.prompt {
				finished = append(finished, s)
			}
		}
		d := time.Duration(simDecodeSecs(decode)*float64(time.Second)) + time.Duration(simChunkSecs(prefill)*float64(time.Second))
		d = time.Duration(float64(d) * (1 + 0.05*(noise.Float64()-0.5)))
		c.observe(decode, prefill, false, d, 0)
		now += d.Seconds()
		for _, s := range finished {
			res.ttft = append(res.ttft, now-s.sent)
			s.out = 1
		}
		for _, s := range decoders {
			res.itl = append(res.itl, d.Seconds())
			s.out++
		}
		res.outTokens += len(decoders) + len(finished)
		active = slices.DeleteFunc(active, func(s *simClient) bool { return s.out >= outLen })
		for len(active) < clients && sent < requests {
			send()
		}
	}
	res.elapsed = now
	return res
}

func quantile(v []float64, q float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// TestStepLatencySimulated: at concurrency 4 and 16 the auto target keeps
// ITL p99 within 3 times its p50 on every seed (the bound of
// docs/performance.md "Step latency"), at an output throughput within 10%
// of the same requests without the bound. (This simulation has no noisy
// neighbours, and the build before the decode probes met the bound in it
// too, at 1.6-2.5 against 1.4-1.6 with them at concurrency 16; the unit
// tests of the probes and of the fit's guards are TestStepCostProbe and
// TestStepCostFewDecodeSteps.)
func TestStepLatencySimulated(t *testing.T) {
	for _, conc := range []int{4, 16} {
		for seed := range uint64(12) {
			auto := simServe(0, conc, 3*conc, seed)
			off := simServe(-1, conc, 3*conc, seed)
			ratio := quantile(auto.itl, 0.99) / quantile(auto.itl, 0.5)
			tput := float64(auto.outTokens) / auto.elapsed / (float64(off.outTokens) / off.elapsed)
			t.Logf("conc %d seed %d: ITL p50 %.0f ms p99 %.0f ms (%.2f; off %.2f), throughput %.2fx off, TTFT p99 %.2fx off",
				conc, seed, 1e3*quantile(auto.itl, 0.5), 1e3*quantile(auto.itl, 0.99), ratio,
				quantile(off.itl, 0.99)/quantile(off.itl, 0.5), tput, quantile(auto.ttft, 0.99)/quantile(off.ttft, 0.99))
			if ratio > 3 {
				t.Errorf("conc %d seed %d: ITL p99/p50 %.2f, want <= 3", conc, seed, ratio)
			}
			if tput < 0.9 {
				t.Errorf("conc %d seed %d: output throughput %.2fx the unbounded run's, want >= 0.9", conc, seed, tput)
			}
		}
	}
}
