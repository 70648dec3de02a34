package stopstr

import "testing"

// BenchmarkPush feeds a 4-piece-per-word text through a matcher with four
// stop strings, one of which keeps partially matching.
func BenchmarkPush(b *testing.B) {
	stops := []string{"<|im_end|>", "\n\nUser:", "</answer>", "STOP"}
	pieces := []string{"The", " answer", " is", " <", "|", "im", "_start", "|>", " S", "TO", "rm", "\n", "\nU", "ser", " ok"}
	b.ReportAllocs()
	for b.Loop() {
		m, _ := New(stops, false)
		for _, p := range pieces {
			m.Push(p)
		}
		m.Flush()
	}
}
