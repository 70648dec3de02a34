package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
)

// Dist is a distribution of lengths in tokens: fixed (Min == Max), uniform
// on [Min, Max], or normal (Kind "normal": mean Mean, spread Std, clamped to
// [Min, Max]).
type Dist struct {
	Kind string  `json:"kind"` // "fixed", "uniform" or "normal"
	Min  int     `json:"min"`
	Max  int     `json:"max"`
	Mean float64 `json:"mean,omitempty"`
	Std  float64 `json:"std,omitempty"`
}

// Fixed is the distribution that always gives n.
func Fixed(n int) Dist { return Dist{Kind: "fixed", Min: n, Max: n} }

// ParseDist reads "128" (fixed), "64:256" (uniform) or "128~32" (normal
// with mean 128 and standard deviation 32, clamped to [1, 4*mean]).
func ParseDist(s string) (Dist, error) {
	s = strings.TrimSpace(s)
	var a, b int
	var m, sd float64
	switch {
	case strings.Contains(s, ":"):
		if _, err := fmt.Sscanf(s, "%d:%d", &a, &b); err != nil || a < 1 || b < a {
			return Dist{}, fmt.Errorf("bench: bad uniform length %q (want MIN:MAX, 1 <= MIN <= MAX)", s)
		}
		return Dist{Kind: "uniform", Min: a, Max: b}, nil
	case strings.Contains(s, "~"):
		if _, err := fmt.Sscanf(s, "%g~%g", &m, &sd); err != nil || m < 1 || sd < 0 {
			return Dist{}, fmt.Errorf("bench: bad normal length %q (want MEAN~STD)", s)
		}
		return Dist{Kind: "normal", Min: 1, Max: int(4 * m), Mean: m, Std: sd}, nil
	default:
		if _, err := fmt.Sscanf(s, "%d", &a); err != nil || a < 1 {
			return Dist{}, fmt.Errorf("bench: bad length %q (want N >= 1, MIN:MAX or MEAN~STD)", s)
		}
		return Fixed(a), nil
	}
}

// Sample draws one length.
func (d Dist) Sample(r *rand.Rand) int {
	switch d.Kind {
	case "uniform":
		return d.Min + r.IntN(d.Max-d.Min+1)
	case "normal":
		v := int(math.Round(d.Mean + d.Std*r.NormFloat64()))
		return max(d.Min, min(d.Max, v))
	}
	return d.Min
}

// Center is the length a distribution is centred on: its value, the
// middle of its range, or its mean.
func (d Dist) Center() int {
	switch d.Kind {
	case "uniform":
		return (d.Min + d.Max) / 2
	case "normal":
		return max(1, int(math.Round(d.Mean)))
	}
	return d.Min
}

func (d Dist) String() string {
	switch d.Kind {
	case "uniform":
		return fmt.Sprintf("%d:%d", d.Min, d.Max)
	case "normal":
		return fmt.Sprintf("%g~%g", d.Mean, d.Std)
	}
	return fmt.Sprint(d.Min)
}

// Workload describes the requests of a run. A prompt is, in order of
// preference: the next of Prompts (a JSONL file's "prompt" fields, in
// order, cycling); token ids drawn from Vocab, exactly the sampled length
// (docs/bench.md: input methods); text from Text, calibrated against the
// server to the sampled length; or, with neither, uncalibrated synthetic
// words (one word per asked token).
type Workload struct {
	Input   Dist      `json:"input_tokens"`
	Output  Dist      `json:"output_tokens"`
	Prompts []string  `json:"-"`
	Vocab   *Vocab    `json:"-"`
	Text    *TextPlan `json:"-"`
	Seed    uint64    `json:"seed"`
	// IgnoreEOS makes every request generate exactly its output length.
	IgnoreEOS bool `json:"ignore_eos"`
	// Temperature of every request (0: greedy).
	Temperature float64 `json:"temperature"`
	// Guided makes a fraction of the requests constrained (nil: none).
	Guided *Guided `json:"guided,omitempty"`
}

// Guided constrains a fraction of a workload's requests to a JSON Schema
// (docs/bench.md: guided requests). Request i is constrained when
// floor((i+1)*Fraction) > floor(i*Fraction): exactly that fraction of
// every prefix (rounded down), spread evenly, and the same requests
// whatever the seed; the prompts are those of the same workload without
// it.
type Guided struct {
	Fraction   float64 `json:"fraction"`
	JSONSchema string  `json:"-"`
	Source     string  `json:"schema"` // where the schema came from, for the report
}

// constrains says whether request i of the workload is constrained.
func (g *Guided) constrains(i int) bool {
	if g == nil || g.Fraction <= 0 {
		return false
	}
	return math.Floor(float64(i+1)*g.Fraction) > math.Floor(float64(i)*g.Fraction)
}

// Request is one generation the load generator sends.
type Request struct {
	Index  int
	Prompt string
	// TokenIDs is the prompt as vocabulary ids; when set it is sent
	// instead of Prompt.
	TokenIDs []uint32
	// InputTokens is the asked length of the new input (0: not set by the
	// workload, as for a file's prompts).
	InputTokens int
	// History counts the tokens ahead of the new input that the server
	// attends to (earlier turns of a conversation), as the client counts
	// them; the server's prompt_tokens minus History is the measured input.
	History int
	// InputTolerance is how far, in tokens, the server's count of the new
	// input may be from InputTokens before the report flags it: 0 for
	// token ids, 2% for calibrated text.
	InputTolerance int
	MaxTokens      int
	IgnoreEOS      bool
	Temp           float64
	// Cancel asks the target to cancel the request on purpose after
	// CancelAfter output tokens (0: after a short random delay).
	Cancel      bool
	CancelAfter int
	// GuidedJSONSchema, when not empty, constrains the output to this
	// JSON Schema (OpenEngine GenerateRequest.guided.json_schema).
	GuidedJSONSchema string
}

// Generator hands out the requests of a workload, deterministically for a
// seed.
type Generator struct {
	w   Workload
	rng *rand.Rand
	n   int
}

// NewGenerator returns a generator for w.
func NewGenerator(w Workload) *Generator {
	return &Generator{w: w, rng: rand.New(rand.NewPCG(w.Seed, 0x6265_6e63))}
}

// Next returns the next request (not safe for concurrent use).
func (g *Generator) Next() Request {
	r := Request{Index: g.n, MaxTokens: g.w.Output.Sample(g.rng), IgnoreEOS: g.w.IgnoreEOS, Temp: g.w.Temperature}
	if g.w.Guided.constrains(g.n) {
		r.GuidedJSONSchema = g.w.Guided.JSONSchema
	}
	switch {
	case len(g.w.Prompts) > 0:
		r.Prompt = g.w.Prompts[g.n%len(g.w.Prompts)]
	case g.w.Vocab != nil:
		r.InputTokens = g.w.Input.Sample(g.rng)
		r.TokenIDs = g.w.Vocab.Draw(g.rng, r.InputTokens)
	case g.w.Text != nil:
		r.InputTokens = g.w.Input.Sample(g.rng)
		r.Prompt = g.w.Text.Text(g.rng, r.InputTokens)
		r.InputTolerance = textTolerance(r.InputTokens)
	default:
		r.InputTokens = g.w.Input.Sample(g.rng)
		r.Prompt = SyntheticText(g.rng, r.InputTokens)
		r.InputTolerance = textTolerance(r.InputTokens)
	}
	g.n++
	return r
}

// textTolerance is the accepted distance of a text prompt's length from n
// tokens: 2%, at least one token.
func textTolerance(n int) int { return max(1, int(math.Ceil(0.02*float64(n)))) }

// words are short common words; SentencePiece and BPE vocabularies of
// English models hold each (with its leading space) as one token.
var words = strings.Fields(`the of and to in is was for on are with as his they be at one have this from or
had by word but what some we can out other were all there when up use your how said an each she which do
their time if will way about many then them write would like so these her long make thing see him two has
look more day could go come did number sound no most people my over know water than call first who may down
side been now find any new work part take get place made live where after back little only round man year
came show every good me give our under name very through just form sentence great think say help low line
differ turn cause much mean before move right boy old too same tell does set three want air well also play
small end put home read hand port large spell add even land here must big high such follow act why ask men
change went light kind off need house picture try us again animal point mother world near build self earth
father head stand own page should country found answer school grow study still learn plant cover food sun four
between state keep eye never last let thought city tree cross farm hard start might story saw far sea draw left
late run while press close night real life few north open seem together next white children begin got walk
example ease paper group always music those both mark often letter until mile river car feet care second book
carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch color face
wood main enough plain girl usual young ready above ever red list though feel talk bird soon body dog family
direct pose leave song measure door product black short numeral class wind question happen complete ship area
half rock order fire south problem piece told knew pass since top whole king space heard best hour better true
during hundred five remember step early hold west ground interest reach fast verb sing listen six table travel
less morning ten simple several vowel toward war lay against pattern slow center love person money serve appear
road map rain rule govern pull cold notice voice unit power town fine certain fly fall lead cry dark machine note
wait plan figure star box noun field rest correct able pound done beauty drive stood contain front teach week final
gave green oh quick develop ocean warm free minute strong special mind behind clear tail produce fact street inch`)

// SyntheticText returns n words drawn from a fixed list, a stand-in for a
// prompt of about n tokens.
func SyntheticText(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(words[r.IntN(len(words))])
	}
	return b.String()
}

// ReadPromptsJSONL reads a file with one JSON object per line and takes
// each object's "prompt" (or "text") string. Blank lines are skipped.
func ReadPromptsJSONL(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<16), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		var obj struct {
			Prompt *string `json:"prompt"`
			Text   *string `json:"text"`
		}
		if err := json.Unmarshal([]byte(s), &obj); err != nil {
			return nil, fmt.Errorf("bench: %s:%d: %w", path, line, err)
		}
		switch {
		case obj.Prompt != nil:
			out = append(out, *obj.Prompt)
		case obj.Text != nil:
			out = append(out, *obj.Text)
		default:
			return nil, fmt.Errorf("bench: %s:%d: no \"prompt\" or \"text\" field", path, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bench: %s: no prompts", path)
	}
	return out, nil
}
