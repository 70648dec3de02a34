package bench

import (
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"oengine/grammar"
	pb "oengine/proto/openengine/v1"
)

const guidedTestSchema = `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`

// TestGuidedPlan: the guided requests are exactly floor(n*fraction) of
// every prefix of n requests, spread evenly, carry the schema, and the
// prompts and lengths are those of the same workload without guidance.
func TestGuidedPlan(t *testing.T) {
	for _, frac := range []float64{0.5, 0.3, 1, 0.01} {
		w := fixedWorkload(8, 4)
		plain := NewGenerator(w)
		w.Guided = &Guided{Fraction: frac, JSONSchema: guidedTestSchema}
		g := NewGenerator(w)
		guided := 0
		for i := range 200 {
			r, p := g.Next(), plain.Next()
			if r.GuidedJSONSchema != "" {
				if r.GuidedJSONSchema != guidedTestSchema {
					t.Fatalf("fraction %g request %d: schema %q", frac, i, r.GuidedJSONSchema)
				}
				guided++
			}
			if want := int(math.Floor(float64(i+1) * frac)); guided != want {
				t.Fatalf("fraction %g: %d guided in the first %d requests, want %d", frac, guided, i+1, want)
			}
			r.GuidedJSONSchema = ""
			if r.Prompt != p.Prompt || r.MaxTokens != p.MaxTokens || r.InputTokens != p.InputTokens {
				t.Fatalf("fraction %g request %d differs from the unguided workload: %+v vs %+v", frac, i, r, p)
			}
		}
	}
	if (&Guided{Fraction: 0.5}).constrains(0) || !(&Guided{Fraction: 0.5}).constrains(1) || (*Guided)(nil).constrains(1) {
		t.Fatal("constrains: request 0 of a half is free, request 1 guided, nil guides nothing")
	}
}

// guidedServer is a fake OpenEngine Inference server that records what
// each Generate asked: the prompt and the guided field. A guided request
// gets 2 tokens (its grammar ends it), a free one its max_tokens.
type guidedServer struct {
	pb.UnimplementedInferenceServer
	mu   sync.Mutex // protects seen
	seen map[string]*pb.GuidedDecoding
}

func (s *guidedServer) Generate(req *pb.GenerateRequest, st grpc.ServerStreamingServer[pb.GenerateResponse]) error {
	s.mu.Lock()
	s.seen[req.GetPrompt()] = req.GetGuided()
	s.mu.Unlock()
	n := int(req.GetStopping().GetMaxTokens())
	if req.GetGuided() != nil {
		n = 2
	}
	for i := range n {
		if err := st.Send(&pb.GenerateResponse{Event: &pb.GenerateResponse_Token{Token: &pb.TokenOutput{
			Tokens: []*pb.TokenInfo{{TokenId: uint32(i)}}}}}); err != nil {
			return err
		}
	}
	return st.Send(&pb.GenerateResponse{Usage: &pb.Usage{PromptTokens: 3, CompletionTokens: uint32(n)}})
}

// TestServeGuidedFraction: against a fake server, half of the requests of
// a run carry guided.json_schema with the file's schema, the other half no
// guided field; the report counts them, puts the fraction and schema in
// its configuration, and does not flag the guided outputs' lengths.
func TestServeGuidedFraction(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fake := &guidedServer{seen: map[string]*pb.GuidedDecoding{}}
	srv := grpc.NewServer()
	pb.RegisterInferenceServer(srv, fake)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	g, err := DialGRPC(lis.Addr().String(), "m")
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	const n = 20
	w := fixedWorkload(8, 6)
	for i := range n {
		w.Prompts = append(w.Prompts, "prompt "+strings.Repeat("x", i))
	}
	w.Guided = &Guided{Fraction: 0.5, JSONSchema: guidedTestSchema, Source: "schema.json"}
	cfg := ServeConfig{Workload: w, Load: Load{Concurrency: 4, Requests: n}}
	reps, err := RunServe(testCtx(t), g, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	r := reps[0]
	var guided []int
	for i, p := range w.Prompts {
		gd, ok := fake.seen[p]
		if !ok {
			t.Fatalf("prompt %d never reached the server", i)
		}
		if gd == nil {
			continue
		}
		if gd.GetJsonSchema() != guidedTestSchema {
			t.Fatalf("prompt %d: guided %v, want json_schema %s", i, gd, guidedTestSchema)
		}
		guided = append(guided, i)
	}
	if want := []int{1, 3, 5, 7, 9, 11, 13, 15, 17, 19}; !slices.Equal(guided, want) {
		t.Fatalf("guided requests %v, want %v", guided, want)
	}
	if r.Succeeded != n || r.GuidedRequests != n/2 || r.GuidedOutTokens != 2*n/2 || r.OutTokens != 2*n/2+6*n/2 {
		t.Errorf("ok %d guided %d (tokens %d) out %d; want %d, %d (%d), %d", r.Succeeded, r.GuidedRequests, r.GuidedOutTokens, r.OutTokens, n, n/2, n, 8*n/2)
	}
	if r.OutputMismatches != 0 {
		t.Errorf("%d output length mismatches: a guided output's length is the grammar's", r.OutputMismatches)
	}
	if r.Config["guided_fraction"] != 0.5 || r.Config["guided_schema"] != "schema.json" {
		t.Errorf("config %v lacks the guided fraction and schema", r.Config)
	}
	var sb strings.Builder
	WriteTable(&sb, reps)
	if !strings.Contains(sb.String(), "10 of 20 requests constrained") {
		t.Errorf("table does not report the guided requests:\n%s", sb.String())
	}
}

// TestServeGuidedRefused: a guided workload on a target that cannot carry
// the schema, or in a scenario that does not send it, fails before any
// request.
func TestServeGuidedRefused(t *testing.T) {
	w := fixedWorkload(4, 4)
	w.Guided = &Guided{Fraction: 0.5, JSONSchema: guidedTestSchema}
	g := &GRPC{}
	for _, c := range []struct {
		name string
		t    Target
		cfg  ServeConfig
		want string
	}{
		{"openai", NewOpenAI("http://127.0.0.1:1", "m"), ServeConfig{Workload: w}, "need the grpc target"},
		{"multiturn", g, ServeConfig{Scenario: ScenarioMultiTurn, Workload: w}, "not supported by the multiturn"},
		{"no schema", g, ServeConfig{Workload: Workload{Guided: &Guided{Fraction: 0.5}}}, "need a fraction"},
	} {
		err := checkGuided(c.t, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
	if err := checkGuided(g, ServeConfig{Workload: w}); err != nil {
		t.Errorf("grpc generate: %v", err)
	}
}

// TestGuidedSchemaInSubset: the schema docs/bench.md benchmarks with is
// inside the subset and the default limits a server compiles with.
func TestGuidedSchemaInSubset(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "guided-schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	pieces := make([][]byte, 257) // every byte, then an end token
	for i := range 256 {
		pieces[i] = []byte{byte(i)}
	}
	v := grammar.NewVocab(pieces, []int32{256})
	if _, err := grammar.Compile(grammar.Spec{Kind: grammar.KindJSONSchema, Source: string(b)}, v, grammar.Limits{}); err != nil {
		t.Fatal(err)
	}
}
