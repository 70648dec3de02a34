package server

import (
	"context"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "oengine/proto/openengine/v1"
)

// BenchmarkGenerateFake measures the server's own cost per request over a
// real TCP connection: a fake engine that emits 16 tokens instantly, so
// the time is validation, event mapping, protobuf and gRPC.
func BenchmarkGenerateFake(b *testing.B) {
	h := startServer(b, testConfig(), Model{Backend: newFake(b, "m")})
	req := with(prompt("bench"), func(r *pb.GenerateRequest) {
		r.Stopping = &pb.StoppingOptions{MaxTokens: proto.Uint32(16)}
	})
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb_ *testing.PB) {
		for pb_.Next() {
			if _, err := h.generate(ctx, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)*16/b.Elapsed().Seconds(), "tokens/s")
}
