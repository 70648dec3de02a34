package conformance

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"oengine/engine"
	"oengine/grammar"
	"oengine/sampling"
)

// TestMixedBatchFreeUnchanged: on a real model, greedy free requests
// batched with constrained ones (conformance schemas, temperature 1)
// produce exactly the tokens they produce alone. A step whose solo top-1
// margin is below 1e-3 may flip under batch arithmetic (as in the
// engine's batch invariance test); past it the outputs may differ.
func TestMixedBatchFreeUnchanged(t *testing.T) {
	tm := loadTiny(t, "tiny-llama-q8_0", engine.Config{MaxRunning: 64})
	e := tm.m.Engine
	schemas := readSchemas(t, "positive")
	var cons []grammar.Constraint
	for _, s := range schemas {
		if len(cons) == 8 {
			break
		}
		if s.name[:4] != "jsb-" {
			continue
		}
		capped, err := capSchema(s.text)
		if err != nil {
			t.Fatal(err)
		}
		d, err := grammar.CompileSchema(capped, grammar.SchemaOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cons = append(cons, grammar.NewIndex(d, tm.vocab))
	}
	free := make([]engine.Request, 6)
	for i := range free {
		free[i] = engine.Request{Prompt: fmt.Sprintf("Free request %d: once upon a time", i), MaxTokens: 12 + i,
			Sampling: sampling.Options{Temperature: ptr(0.0)}, Stop: engine.StopParams{IgnoreEOS: true},
			Logprobs: &sampling.Candidates{Mode: sampling.CandidatesTopN, TopN: 2}}
	}
	ctx, cancel := withTimeout(10 * time.Minute)
	defer cancel()
	alone := make([][]int32, len(free))
	margins := make([][]float64, len(free))
	for i, r := range free {
		outs, err := generate(ctx, e, r)
		if err != nil || outs[0].err != nil {
			t.Fatalf("free %d alone: %v %v", i, err, outs[0].err)
		}
		alone[i] = outs[0].tokens
		margins[i] = outs[0].margins
	}
	var mu sync.Mutex // protects mixed
	mixed := make([][]int32, len(free))
	n := len(free) + len(cons)
	parallel(n, n, func(i int) {
		if i < len(free) {
			outs, err := generate(ctx, e, free[i])
			if err != nil || outs[0].err != nil {
				t.Errorf("free %d mixed: %v %v", i, err, outs[0].err)
				return
			}
			mu.Lock()
			mixed[i] = outs[0].tokens
			mu.Unlock()
			return
		}
		k := i - len(free)
		outs, err := generate(ctx, e, engine.Request{Prompt: "Reply with JSON: ", MaxTokens: 1024, Constraint: cons[k],
			Sampling: sampling.Options{Temperature: ptr(1.0), Seed: ptr(uint64(k))}})
		if err != nil || outs[0].err != nil || outs[0].finish == nil || outs[0].finish.Reason != engine.FinishStop {
			t.Errorf("constrained %d: %v %+v", k, err, outs)
		}
	})
	for i := range free {
		if slices.Equal(mixed[i], alone[i]) {
			continue
		}
		j := 0
		for j < len(alone[i]) && j < len(mixed[i]) && alone[i][j] == mixed[i][j] {
			j++
		}
		if j < len(margins[i]) && margins[i][j] < 1e-3 {
			t.Logf("free %d: differs from step %d, a near tie alone (margin %.2g)", i, j, margins[i][j])
			continue
		}
		t.Errorf("free %d beside constrained requests: %v, alone %v", i, mixed[i], alone[i])
	}
}
