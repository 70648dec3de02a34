package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
	"oengine/stopstr"
)

// controlService implements openengine.v1.Control.
type controlService struct {
	pb.UnimplementedControlServer
	s *Server
}

// GetServerInfo describes this process: schema identity, role, models and
// configured capacity (of the default model's engine).
func (c *controlService) GetServerInfo(ctx context.Context, _ *pb.GetServerInfoRequest) (*pb.ServerInfo, error) {
	s := c.s
	lim := s.models[0].Backend.Limits()
	return &pb.ServerInfo{
		EngineName:      s.cfg.EngineName,
		EngineVersion:   s.cfg.EngineVersion,
		EngineRole:      pb.EngineRole_ENGINE_ROLE_AGGREGATED,
		InstanceId:      s.instanceID,
		SupportedModels: s.modelNames(),
		Parallelism: &pb.ParallelismInfo{
			TensorParallelSize: ptr[uint32](1), PipelineParallelSize: ptr[uint32](1),
			DataParallelSize: ptr[uint32](1), DataParallelRank: ptr[uint32](0),
			DataParallelStartRank: ptr[uint32](0), DecodeContextParallelSize: ptr[uint32](1),
		},
		KvConnector:           &pb.KvConnectorInfo{Enabled: ptr(false)},
		SchemaRevision:        pb.SchemaRevision,
		MinimumClientRevision: pb.MinimumClientRevision,
		SchemaRelease:         pb.SchemaRelease,
		Capacity: &pb.DeploymentCapacity{
			KvBlockSize:        ptr(clampU32(lim.PageSize)),
			TotalKvBlocks:      ptr(uint64(max(lim.TotalPages, 0))),
			MaxRunningRequests: ptr(uint64(max(lim.MaxRunning, 0))),
			MaxBatchedTokens:   ptr(uint64(max(lim.MaxBatchedTokens, 0))),
			MaxLoras:           ptr[uint32](0),
		},
		Extra: s.coverage(),
	}, nil
}

// coverage says which models the router-facing figures describe
// (docs/api.md, "KV events for external routers"): "models" are the
// listed models (GetLoad's sums), "kv_events_model" the one whose cache
// feeds GetKvEventSources and whose figures are the capacity, and
// "auxiliary_models" the served but unlisted ones.
func (s *Server) coverage() *structpb.Struct {
	var listed, aux []any
	for _, m := range s.models {
		if m.Auxiliary {
			aux = append(aux, m.Name)
		} else {
			listed = append(listed, m.Name)
		}
	}
	f := map[string]any{"models": listed, "kv_events_model": s.models[0].Name}
	if dev := s.models[0].Backend.Limits().Device; dev != "" {
		f["device"] = dev // where the default model runs (cpu or the CUDA device)
	}
	if len(aux) > 0 {
		f["auxiliary_models"] = aux
	}
	st, err := structpb.NewStruct(f)
	if err != nil {
		return nil
	}
	return st
}

// GetModelInfo reports one model's limits and capabilities; the name is
// required and may be an alias.
func (c *controlService) GetModelInfo(ctx context.Context, req *pb.GetModelInfoRequest) (*pb.ModelInfo, error) {
	if req.GetModel() == "" {
		return nil, invalidf("model is required").err()
	}
	m, ok := c.s.byName[req.GetModel()]
	if !ok {
		return nil, modelNotFound(req.GetModel()).err()
	}
	lim := m.Backend.Limits()
	modes := []pb.CandidateTokenSelectionMode{
		pb.CandidateTokenSelectionMode_CANDIDATE_TOKEN_SELECTION_MODE_TOP_N,
		pb.CandidateTokenSelectionMode_CANDIDATE_TOKEN_SELECTION_MODE_TOKEN_IDS,
		pb.CandidateTokenSelectionMode_CANDIDATE_TOKEN_SELECTION_MODE_ALL,
	}
	logprobs := func() *pb.LogprobCapabilities {
		lc := &pb.LogprobCapabilities{Supported: ptr(true), CandidateSelectionModes: modes}
		if lim.MaxLogprobs > 0 {
			lc.MaxTopN = ptr(clampU32(lim.MaxLogprobs))
		}
		return lc
	}
	return &pb.ModelInfo{
		ModelId:               m.ID,
		ServedModelName:       m.Name,
		ServedModelAliases:    m.Aliases,
		MaxContextLength:      ptr(clampU32(lim.ContextLen)),
		MaxOutputTokens:       ptr(clampU32(lim.MaxOutputTokens)),
		SupportsTextInput:     ptr(true),
		SupportsTokenIdsInput: ptr(true),
		Generation: &pb.GenerationCapabilities{
			PromptLogprobs:            logprobs(),
			OutputLogprobs:            logprobs(),
			GuidedDecoding:            m.guidedCaps(),
			MaxNumSequences:           ptr(uint32(maxSequences(lim))),
			SupportsPriority:          ptr(true),
			SupportsStopInOutput:      ptr(true),
			SupportsCacheSalt:         ptr(true),
			SupportsPrefixCacheBypass: ptr(true),
		},
		SupportsLora:       ptr(false),
		SupportsMultimodal: ptr(false),
		ToolCallParser:     toolParserName(m),
		Sessions:           c.s.sessionCaps(m),
		StreamingInput:     c.s.streamingCaps(m),
		Extra:              limitsExtra(lim),
	}, nil
}

// limitsExtra advertises oengine's request limits in ModelInfo.extra under
// "oengine_limits" (docs/api.md, "Limits"); figures the model does not
// know are left out.
func limitsExtra(lim engine.Limits) *structpb.Struct {
	f := map[string]any{
		"max_request_id_bytes":    MaxClientIDBytes,
		"max_session_id_bytes":    MaxClientIDBytes,
		"max_stop_strings":        stopstr.MaxStops,
		"max_stop_string_bytes":   stopstr.MaxStopBytes,
		"max_grpc_message_bytes":  MaxRecvMsgBytes,
		"max_prompt_output_bytes": MaxPromptOutputBytes,
	}
	if lim.MaxPromptLogprobEntries > 0 {
		f["max_prompt_logprob_entries"] = lim.MaxPromptLogprobEntries
	}
	if lim.MaxTokenCandidates > 0 {
		f["max_token_candidates"] = lim.MaxTokenCandidates
	}
	top := map[string]any{"oengine_limits": f}
	if lim.Device != "" {
		top["device"] = lim.Device
	}
	if lim.EmbeddingDim > 0 { // docs/api.md, "Embeddings"
		em := map[string]any{"dimensions": lim.EmbeddingDim, "pooling": lim.Pooling.String()}
		if lim.EmbeddingsOnly {
			em["encoder"] = true // it generates nothing
		}
		if lim.RankOutputs > 0 {
			em["rerank"] = true // a classification head: /v1/rerank
		}
		top["embeddings"] = em
	}
	if lim.Speculation != "" { // docs/api.md, "Speculative decoding"
		sp := map[string]any{"mode": lim.Speculation, "draft_tokens": lim.SpecTokens, "adaptive": lim.SpecAdaptive}
		if lim.DraftModel != "" {
			sp["draft_model"] = lim.DraftModel
		}
		top["speculative"] = sp
	}
	st, err := structpb.NewStruct(top)
	if err != nil {
		return nil
	}
	return st
}

// GetLoad sums the live figures of the listed models' engines (one
// data-parallel rank); an auxiliary model (--fast-model) is not counted,
// and attributes.models names the models covered.
func (c *controlService) GetLoad(ctx context.Context, req *pb.GetLoadRequest) (*pb.LoadInfo, error) {
	var running, waiting, runTok, waitTok, used, total int
	for _, m := range c.s.listed() {
		l := m.Backend.Load()
		running += l.Running
		waiting += l.Waiting
		runTok += l.TokensRunning
		waitTok += l.TokensWaiting
		used += l.Pages.Used()
		total += l.Pages.Total
	}
	li := &pb.LoadInfo{
		InstanceId:         c.s.instanceID,
		TimestampUnixNanos: ptr(uint64(time.Now().UnixNano())),
		RunningRequests:    ptr(clampU32(running)),
		QueuedRequests:     ptr(clampU32(waiting)),
		ActiveKvSessions:   ptr(clampU32(c.s.liveSessions())),
		UsedKvBlocks:       ptr(uint64(max(used, 0))),
		TotalKvBlocks:      ptr(uint64(max(total, 0))),
		RunningTokens:      ptr(uint64(max(runTok, 0))),
		WaitingTokens:      ptr(uint64(max(waitTok, 0))),
		Attributes:         c.s.coverage(),
	}
	if req.GetIncludePerRank() {
		li.Ranks = []*pb.RankLoadInfo{{
			DataParallelRank: ptr[uint32](0),
			RunningRequests:  li.RunningRequests,
			QueuedRequests:   li.QueuedRequests,
			UsedKvBlocks:     li.UsedKvBlocks,
			TotalKvBlocks:    li.TotalKvBlocks,
		}}
	}
	return li, nil
}

// Abort cancels exactly one target. ALREADY_FINISHED is a success.
func (c *controlService) Abort(ctx context.Context, req *pb.AbortRequest) (*pb.AbortResponse, error) {
	switch t := req.GetTarget().(type) {
	case *pb.AbortRequest_RequestId:
		if t.RequestId == "" {
			return nil, invalidf("request_id is empty").err()
		}
		if aerr := checkClientID("request_id", t.RequestId); aerr != nil {
			return nil, aerr.err()
		}
		return c.abortID(PrincipalFrom(ctx).Scope(t.RequestId), t.RequestId)
	case *pb.AbortRequest_KvSession:
		if meta := metaFrom(ctx); meta.HasDPRank && t.KvSession.GetDpRank() != meta.DPRank {
			return nil, invalidf("kv_session.dp_rank %d disagrees with %s %d", t.KvSession.GetDpRank(), mdTargetDPRank, meta.DPRank).err()
		}
		return nil, newAPIError(codes.NotFound, reasonKVSessionNotFound, pb.ErrorCode_ERROR_CODE_KV_SESSION_NOT_FOUND,
			"kv session %q is unknown (this server is AGGREGATED)", t.KvSession.GetSessionId()).err()
	case *pb.AbortRequest_AllRequests:
		if err := requireAdmin(ctx, "Abort{all_requests}"); err != nil {
			return nil, err
		}
		n := 0
		for _, m := range c.s.models {
			n += m.Backend.AbortAll()
		}
		return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ABORTED, Message: fmt.Sprintf("aborted %d requests", n)}, nil
	}
	return nil, invalidf("abort needs exactly one target: request_id, kv_session or all_requests").err()
}

// abortID aborts the request whose internal (scoped) id is id; clientID is
// the id the client named.
func (c *controlService) abortID(id, clientID string) (*pb.AbortResponse, error) {
	for _, m := range c.s.models {
		err := m.Backend.Abort(id)
		switch {
		case err == nil:
			return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ABORTED}, nil
		case errors.Is(err, engine.ErrAlreadyFinished):
			return &pb.AbortResponse{Status: pb.AbortStatus_ABORT_STATUS_ALREADY_FINISHED, Message: "request already finished"}, nil
		case errors.Is(err, engine.ErrNotFound):
			continue
		default:
			return nil, statusErr(err)
		}
	}
	return nil, fromEngine(&engine.Error{Code: engine.CodeRequestNotFound,
		Message: fmt.Sprintf("server: request %q is unknown", clientID)}).err()
}

// loraDisabled is upstream's answer of an engine without LoRA.
func loraDisabled() error {
	return newAPIError(codes.FailedPrecondition, reasonUnsupportedFeature, pb.ErrorCode_ERROR_CODE_UNSUPPORTED_FEATURE,
		"LoRA is not enabled on this engine").err()
}

func (c *controlService) LoadLora(context.Context, *pb.LoadLoraRequest) (*pb.LoadLoraResponse, error) {
	return nil, loraDisabled()
}

func (c *controlService) UnloadLora(context.Context, *pb.UnloadLoraRequest) (*pb.UnloadLoraResponse, error) {
	return nil, loraDisabled()
}

func (c *controlService) ListLoras(context.Context, *pb.ListLorasRequest) (*pb.ListLorasResponse, error) {
	return nil, loraDisabled()
}
