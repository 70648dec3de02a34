package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
	"oengine/sampling"
	"oengine/stopstr"
)

// genOptions are the parts of a GenerateRequest the server itself applies
// when it turns engine events into responses.
type genOptions struct {
	n              int  // outputs
	promptLogprobs bool // send PromptOutput
	promptStart    int  // first prompt position reported
	outputLogprobs bool // fill TokenInfo logprob, rank, candidates
}

// buildRequest validates a GenerateRequest before acceptance and turns it
// into an engine request. Every refusal is an *apiError (docs/design.md §1).
func (s *Server) buildRequest(req *pb.GenerateRequest, meta callMeta) (*Model, engine.Request, genOptions, *apiError) {
	var (
		er  engine.Request
		opt genOptions
	)
	m, ok := s.Lookup(req.GetModel())
	if !ok {
		return nil, er, opt, modelNotFound(req.GetModel())
	}
	lim := m.Backend.Limits()
	id, aerr := requestID(req.GetRequestId(), meta.Principal)
	if aerr != nil {
		return nil, er, opt, aerr
	}
	er.ID = id
	er.Priority = meta.Priority

	switch in := req.GetInput().(type) {
	case *pb.GenerateRequest_Prompt:
		if s.cfg.MaxPromptBytes > 0 && len(in.Prompt) > s.cfg.MaxPromptBytes {
			return nil, er, opt, newAPIError(codes.InvalidArgument, "PAYLOAD_TOO_LARGE", pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT,
				"prompt is %d bytes, the limit is %d", len(in.Prompt), s.cfg.MaxPromptBytes)
		}
		er.Prompt = in.Prompt
	case *pb.GenerateRequest_TokenIds:
		ids := in.TokenIds.GetIds()
		if len(ids) == 0 {
			return nil, er, opt, invalidf("token_ids is empty")
		}
		er.TokenIDs = make([]int32, len(ids))
		for i, id := range ids {
			if lim.Vocab > 0 && int64(id) >= int64(lim.Vocab) {
				return nil, er, opt, invalidf("token_ids[%d] = %d is outside the vocabulary (%d)", i, id, lim.Vocab)
			}
			er.TokenIDs[i] = int32(id)
		}
	default:
		return nil, er, opt, invalidf("exactly one of prompt or token_ids is required")
	}

	if len(req.GetMedia()) > 0 {
		return nil, er, opt, unsupportedf("media input is not supported by a text model")
	}
	if req.GetLoraName() != "" {
		return nil, er, opt, unsupportedf("LoRA adapters are not supported (lora_name %q)", req.GetLoraName())
	}
	if ks := req.GetKv().GetSession(); ks != nil {
		if meta.HasDPRank && ks.GetDpRank() != meta.DPRank {
			return nil, er, opt, invalidf("kv.session.dp_rank %d disagrees with %s %d", ks.GetDpRank(), mdTargetDPRank, meta.DPRank)
		}
		return nil, er, opt, newAPIError(codes.FailedPrecondition, reasonRoleMismatch, pb.ErrorCode_ERROR_CODE_ROLE_MISMATCH,
			"this server is AGGREGATED: a KvSessionRef (disaggregated prefill/decode) is not accepted")
	}
	if req.GetSession() != nil {
		return nil, er, opt, unsupportedf("generation sessions are not enabled on this server")
	}
	if meta.HasDPRank && meta.DPRank != 0 {
		return nil, er, opt, invalidf("%s %d: this server has data-parallel rank 0 only", mdTargetDPRank, meta.DPRank)
	}

	if err := applySampling(&er, &opt, req.GetSampling(), lim); err != nil {
		return nil, er, opt, err
	}
	if err := applyStopping(&er, req.GetStopping(), lim); err != nil {
		return nil, er, opt, err
	}
	if err := applyResponse(&er, &opt, req.GetResponse()); err != nil {
		return nil, er, opt, err
	}
	// Last: compiling is the costliest check (cached per model).
	c, aerr := applyGuided(m, req.GetGuided())
	if aerr != nil {
		return nil, er, opt, aerr
	}
	er.Constraint = c
	er.BypassPrefixCache = req.GetKv().GetBypassPrefixCache()
	er.CacheSalt = req.GetKv().GetCacheSalt()
	// extra.speculative = false opts out of speculative decoding
	// (docs/api.md, "Speculative decoding").
	if v, ok := req.GetExtra().GetFields()["speculative"]; ok {
		b, isBool := v.GetKind().(*structpb.Value_BoolValue)
		if !isBool {
			return nil, er, opt, invalidf("extra.speculative must be a boolean")
		}
		er.NoSpeculation = !b.BoolValue
	}
	return m, er, opt, nil
}

func applySampling(er *engine.Request, opt *genOptions, sp *pb.SamplingParams, lim engine.Limits) *apiError {
	opt.n = 1
	if sp == nil {
		return nil
	}
	if sp.NumSequences != nil {
		n := sp.GetNumSequences()
		if n == 0 {
			return invalidf("sampling.num_sequences must be > 0 when present")
		}
		if max := maxSequences(lim); n > uint32(max) {
			return invalidf("sampling.num_sequences %d exceeds the maximum %d", n, max)
		}
		opt.n = int(n)
	}
	er.N = opt.n
	er.Sampling = sampling.Options{
		Temperature:       sp.Temperature,
		TopP:              sp.TopP,
		TopK:              sp.TopK,
		MinP:              sp.MinP,
		RepetitionPenalty: sp.RepetitionPenalty,
		FrequencyPenalty:  sp.FrequencyPenalty,
		PresencePenalty:   sp.PresencePenalty,
		Seed:              sp.Seed,
	}
	return nil
}

// maxSequences is the num_sequences cap advertised in ModelInfo.
func maxSequences(lim engine.Limits) int {
	if lim.MaxRunning > 0 && lim.MaxRunning < 16 {
		return lim.MaxRunning
	}
	return 16
}

func applyStopping(er *engine.Request, st *pb.StoppingOptions, lim engine.Limits) *apiError {
	if st == nil {
		return nil
	}
	if st.MaxTokens != nil {
		if st.GetMaxTokens() == 0 {
			return invalidf("stopping.max_tokens must be > 0 when present")
		}
		er.MaxTokens = int(st.GetMaxTokens())
	}
	if st.MinTokens != nil {
		er.MinTokens = int(st.GetMinTokens())
		if st.MaxTokens != nil && st.GetMinTokens() > st.GetMaxTokens() {
			return invalidf("stopping.min_tokens %d exceeds max_tokens %d", st.GetMinTokens(), st.GetMaxTokens())
		}
	}
	for i, c := range st.GetConditions() {
		switch c := c.GetCondition().(type) {
		case *pb.StopCondition_StopText:
			if c.StopText == "" {
				return invalidf("stopping.conditions[%d].stop_text is empty", i)
			}
			if len(c.StopText) > stopstr.MaxStopBytes {
				return invalidf("stopping.conditions[%d].stop_text is %d bytes, at most %d", i, len(c.StopText), stopstr.MaxStopBytes)
			}
			if len(er.Stop.Strings) == stopstr.MaxStops {
				return invalidf("more than %d stop strings", stopstr.MaxStops)
			}
			er.Stop.Strings = append(er.Stop.Strings, c.StopText)
		case *pb.StopCondition_StopTokenId:
			if lim.Vocab > 0 && int64(c.StopTokenId) >= int64(lim.Vocab) {
				return invalidf("stopping.conditions[%d].stop_token_id %d is outside the vocabulary", i, c.StopTokenId)
			}
			er.Stop.TokenIDs = append(er.Stop.TokenIDs, int32(c.StopTokenId))
		default:
			return invalidf("stopping.conditions[%d] sets no condition", i)
		}
	}
	er.Stop.IgnoreEOS = st.GetIgnoreEos()
	er.Stop.IncludeStopInOutput = st.GetIncludeStopInOutput()
	return nil
}

func applyResponse(er *engine.Request, opt *genOptions, ro *pb.ResponseOptions) *apiError {
	if ro == nil {
		return nil
	}
	if ro.GetReturnPromptLogprobs() {
		c, err := candidates("response.prompt_candidates", ro.GetPromptCandidates())
		if err != nil {
			return err
		}
		er.PromptLogprobs = c
		opt.promptLogprobs = true
		opt.promptStart = int(ro.GetPromptLogprobStart())
	}
	if ro.GetReturnOutputLogprobs() {
		c, err := candidates("response.output_candidates", ro.GetOutputCandidates())
		if err != nil {
			return err
		}
		er.Logprobs = c
		opt.outputLogprobs = true
	}
	return nil
}

// candidates maps a CandidateTokenSelection; nil selects no candidates
// (only the chosen token's logprob).
func candidates(field string, sel *pb.CandidateTokenSelection) (*sampling.Candidates, *apiError) {
	c := &sampling.Candidates{Mode: sampling.CandidatesNone}
	switch s := sel.GetSelection().(type) {
	case nil:
	case *pb.CandidateTokenSelection_TopN:
		if s.TopN > 0 {
			c.Mode, c.TopN = sampling.CandidatesTopN, int(s.TopN)
		}
	case *pb.CandidateTokenSelection_TokenIds:
		ids := s.TokenIds.GetIds()
		if len(ids) == 0 {
			return nil, invalidf("%s.token_ids is empty", field)
		}
		c.Mode = sampling.CandidatesTokenIDs
		for _, id := range ids {
			if id > 1<<31-1 {
				return nil, invalidf("%s.token_ids: %d is out of range", field, id)
			}
			c.TokenIDs = append(c.TokenIDs, int32(id))
		}
	case *pb.CandidateTokenSelection_All:
		c.Mode = sampling.CandidatesAll
	}
	return c, nil
}
