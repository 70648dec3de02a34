package sampling

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

func f64(x float64) *float64 { return &x }
func i32(x int32) *int32     { return &x }
func u64(x uint64) *uint64   { return &x }

func TestParamsValidate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	mod := func(f func(*Params)) Params { p := Defaults(1); f(&p); return p }
	tests := []struct {
		name  string
		p     Params
		field string // "" = valid
	}{
		{"defaults", Defaults(1), ""},
		{"greedy", mod(func(p *Params) { p.Temperature = 0 }), ""},
		{"all set in range", Params{Temperature: 0.7, TopK: 40, TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.1, FrequencyPenalty: -2, PresencePenalty: 2}, ""},
		{"top_p 1", mod(func(p *Params) { p.TopP = 1 }), ""},
		{"min_p 1", mod(func(p *Params) { p.MinP = 1 }), ""},
		{"negative top_k is off", mod(func(p *Params) { p.TopK = -5 }), ""},
		{"temperature NaN", mod(func(p *Params) { p.Temperature = nan }), "temperature"},
		{"temperature +Inf", mod(func(p *Params) { p.Temperature = inf }), "temperature"},
		{"temperature negative", mod(func(p *Params) { p.Temperature = -0.1 }), "temperature"},
		{"top_p 0", mod(func(p *Params) { p.TopP = 0 }), "top_p"},
		{"top_p above 1", mod(func(p *Params) { p.TopP = 1.0001 }), "top_p"},
		{"top_p negative", mod(func(p *Params) { p.TopP = -1 }), "top_p"},
		{"top_p NaN", mod(func(p *Params) { p.TopP = nan }), "top_p"},
		{"min_p negative", mod(func(p *Params) { p.MinP = -0.01 }), "min_p"},
		{"min_p above 1", mod(func(p *Params) { p.MinP = 1.5 }), "min_p"},
		{"min_p -Inf", mod(func(p *Params) { p.MinP = math.Inf(-1) }), "min_p"},
		{"repetition 0", mod(func(p *Params) { p.RepetitionPenalty = 0 }), "repetition_penalty"},
		{"repetition negative", mod(func(p *Params) { p.RepetitionPenalty = -1 }), "repetition_penalty"},
		{"repetition Inf", mod(func(p *Params) { p.RepetitionPenalty = inf }), "repetition_penalty"},
		{"frequency below -2", mod(func(p *Params) { p.FrequencyPenalty = -2.5 }), "frequency_penalty"},
		{"frequency NaN", mod(func(p *Params) { p.FrequencyPenalty = nan }), "frequency_penalty"},
		{"presence above 2", mod(func(p *Params) { p.PresencePenalty = 3 }), "presence_penalty"},
		{"presence -Inf", mod(func(p *Params) { p.PresencePenalty = math.Inf(-1) }), "presence_penalty"},
		{"zero value is invalid", Params{}, "top_p"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.p.Validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want an error on %s", tc.field)
			}
			var pe *ParamError
			if !errors.As(err, &pe) || pe.Field != tc.field {
				t.Fatalf("Validate() = %v, want a *ParamError on %s", err, tc.field)
			}
			if !errors.Is(err, ErrInvalidParams) {
				t.Errorf("error %v does not wrap ErrInvalidParams", err)
			}
			if !strings.HasPrefix(err.Error(), "sampling: "+tc.field) {
				t.Errorf("message %q lacks the package and field prefix", err)
			}
		})
	}
}

func TestOptionsResolve(t *testing.T) {
	tests := []struct {
		name    string
		o       Options
		want    Params
		wantErr string
	}{
		{"absent fields take defaults", Options{}, Params{Temperature: 0.8, TopP: 1, RepetitionPenalty: 1}, ""},
		{"top_k 0 is off", Options{TopK: i32(0)}, Params{Temperature: 0.8, TopP: 1, RepetitionPenalty: 1}, ""},
		{"top_k negative is off", Options{TopK: i32(-1)}, Params{Temperature: 0.8, TopP: 1, RepetitionPenalty: 1}, ""},
		{"seed present", Options{Seed: u64(0)}, Params{Temperature: 0.8, TopP: 1, RepetitionPenalty: 1, HasSeed: true}, ""},
		{"all present", Options{Temperature: f64(0), TopP: f64(0.5), TopK: i32(7), MinP: f64(0.1),
			RepetitionPenalty: f64(1.2), FrequencyPenalty: f64(0.5), PresencePenalty: f64(-0.5), Seed: u64(42)},
			Params{Temperature: 0, TopP: 0.5, TopK: 7, MinP: 0.1, RepetitionPenalty: 1.2, FrequencyPenalty: 0.5, PresencePenalty: -0.5, Seed: 42, HasSeed: true}, ""},
		{"present top_p 0 rejected", Options{TopP: f64(0)}, Params{}, "top_p"},
		{"logit bias kept", Options{LogitBias: []TokenBias{{ID: 3, Bias: -100}, {ID: 9, Bias: 2.5}}},
			Params{Temperature: 0.8, TopP: 1, RepetitionPenalty: 1, LogitBias: []TokenBias{{ID: 3, Bias: -100}, {ID: 9, Bias: 2.5}}}, ""},
		{"logit bias above 100 rejected", Options{LogitBias: []TokenBias{{ID: 3, Bias: 101}}}, Params{}, "logit_bias"},
		{"logit bias NaN rejected", Options{LogitBias: []TokenBias{{ID: 3, Bias: float32(math.NaN())}}}, Params{}, "logit_bias"},
		{"logit bias negative id rejected", Options{LogitBias: []TokenBias{{ID: -1, Bias: 1}}}, Params{}, "logit_bias"},
		{"logit bias id twice rejected", Options{LogitBias: []TokenBias{{ID: 4, Bias: 1}, {ID: 4, Bias: 2}}}, Params{}, "logit_bias"},
		{"present NaN temperature rejected", Options{Temperature: f64(math.NaN())}, Params{}, "temperature"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.o.Resolve(0.8)
			if tc.wantErr != "" {
				var pe *ParamError
				if !errors.As(err, &pe) || pe.Field != tc.wantErr {
					t.Fatalf("Resolve() error = %v, want one on %s", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Resolve() = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
