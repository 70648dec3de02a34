package sampling

// observe brings the penalty counts up to date with h: only tokens appended
// since the previous call are counted, unless the history shrank or the
// vocabulary changed, which forces a recount. Token ids outside
// [0, vocab) are ignored.
func (s *Sampler) observe(h History, vocab int) {
	if len(s.counts) != vocab {
		s.counts = make([]uint32, vocab)
		s.touched = s.touched[:0]
		s.promptSeen, s.outputSeen = 0, 0
	}
	if len(h.Prompt) < s.promptSeen || len(h.Output) < s.outputSeen {
		s.resetCounts()
	}
	if s.p.RepetitionPenalty != 1 { // the prompt only matters to this penalty
		for _, t := range h.Prompt[s.promptSeen:] {
			if t < 0 || int(t) >= vocab {
				continue
			}
			c := s.counts[t]
			if c == 0 {
				s.touched = append(s.touched, t)
			}
			s.counts[t] = c | promptBit
		}
	}
	s.promptSeen = len(h.Prompt)
	for _, t := range h.Output[s.outputSeen:] {
		if t < 0 || int(t) >= vocab {
			continue
		}
		c := s.counts[t]
		if c == 0 {
			s.touched = append(s.touched, t)
		}
		if c&^promptBit < promptBit-1 { // saturate rather than overflow
			c++
		}
		s.counts[t] = c
	}
	s.outputSeen = len(h.Output)
}

func (s *Sampler) resetCounts() {
	for _, t := range s.touched {
		s.counts[t] = 0
	}
	s.touched = s.touched[:0]
	s.promptSeen, s.outputSeen = 0, 0
}

// rewrite applies the penalties (counting h first) and then the logit
// bias to z, a copy of the logits.
func (s *Sampler) rewrite(z []float32, h History) {
	if s.penalised {
		s.observe(h, len(z))
		s.applyPenalties(z)
	}
	for _, b := range s.p.LogitBias {
		if int(b.ID) < len(z) {
			z[b.ID] += b.Bias
		}
	}
}

// applyPenalties rewrites z ([vocab], a copy of the logits) at every token
// seen so far:
//
//	repetition (prompt or output): z > 0 ? z / r : z * r
//	frequency, presence (output):  z -= f*count + p*[count > 0]
func (s *Sampler) applyPenalties(z []float32) {
	r := s.p.RepetitionPenalty
	f, p := s.p.FrequencyPenalty, s.p.PresencePenalty
	for _, t := range s.touched {
		c := s.counts[t]
		x := float64(z[t])
		if r != 1 {
			if x > 0 {
				x /= r
			} else {
				x *= r
			}
		}
		if n := c &^ promptBit; n > 0 {
			x -= f*float64(n) + p
		}
		z[t] = float32(x)
	}
}
