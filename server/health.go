package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
	"oengine/sampling"
)

// probeTimeout bounds the inference probe of a Health call.
const probeTimeout = 30 * time.Second

var probeSeq atomic.Uint64

// Health answers cheaply from the server's state; with
// include_inference_probe it also runs a one-token generation, reported as
// the check "inference_probe".
func (c *controlService) Health(ctx context.Context, req *pb.HealthRequest) (*pb.HealthResponse, error) {
	m, ok := c.s.Lookup(req.GetModel())
	if !ok {
		return nil, modelNotFound(req.GetModel()).err()
	}
	checks := c.s.checks(req.GetRole())
	if req.GetIncludeInferenceProbe() {
		checks = append(checks, c.s.probe(ctx, m))
	}
	return &pb.HealthResponse{State: overall(checks), Checks: checks}, nil
}

// checks are the cheap checks: grpc, scheduler, model, kv_connector, role.
func (s *Server) checks(role pb.EngineRole) []*pb.HealthCheck {
	ready := pb.HealthState_HEALTH_STATE_READY
	sched := &pb.HealthCheck{Name: "scheduler", State: ready}
	grpcCheck := &pb.HealthCheck{Name: "grpc", State: ready}
	if s.draining.Load() {
		sched.State, sched.Message = pb.HealthState_HEALTH_STATE_DRAINING, "draining: not admitting new requests"
		grpcCheck.State = pb.HealthState_HEALTH_STATE_DRAINING
	}
	modelCheck := &pb.HealthCheck{Name: "model", State: ready, Message: fmt.Sprintf("%d model(s) loaded", len(s.models))}
	if s.cfg.ModelDegraded != "" {
		modelCheck.State, modelCheck.Message = pb.HealthState_HEALTH_STATE_DEGRADED, s.cfg.ModelDegraded
	}
	roleCheck := &pb.HealthCheck{Name: "role", State: ready, Message: "AGGREGATED"}
	if role != pb.EngineRole_ENGINE_ROLE_UNSPECIFIED && role != pb.EngineRole_ENGINE_ROLE_AGGREGATED {
		roleCheck.State, roleCheck.Message = pb.HealthState_HEALTH_STATE_NOT_READY, fmt.Sprintf("asked for %v, this server is AGGREGATED", role)
	}
	return []*pb.HealthCheck{
		grpcCheck, sched, modelCheck,
		{Name: "kv_connector", State: ready, Message: "no KV connector (aggregated serving)"},
		roleCheck,
	}
}

// probe runs a minimal real inference: one greedy token from one token.
func (s *Server) probe(ctx context.Context, m *Model) *pb.HealthCheck {
	hc := &pb.HealthCheck{Name: "inference_probe", State: pb.HealthState_HEALTH_STATE_NOT_READY}
	if s.draining.Load() {
		hc.State, hc.Message = pb.HealthState_HEALTH_STATE_DRAINING, "draining: probe skipped"
		return hc
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	start := time.Now()
	zero := 0.0
	tok := int32(1)
	if v := m.Backend.Limits().Vocab; v > 0 && int(tok) >= v {
		tok = 0
	}
	st, err := m.Backend.Submit(ctx, engine.Request{
		ID:        fmt.Sprintf("oengine-probe-%d-%d", time.Now().UnixNano(), probeSeq.Add(1)),
		TokenIDs:  []int32{tok},
		N:         1,
		MaxTokens: 1,
		Sampling:  sampling.Options{Temperature: &zero},
		Stop:      engine.StopParams{IgnoreEOS: true},
		Priority:  1 << 20, // a probe should not wait behind a long queue
	})
	if err != nil {
		hc.Message = "submit: " + err.Error()
		return hc
	}
	defer st.Cancel()
	tokens := 0
	for {
		ev, err := st.Next(ctx)
		if err != nil {
			hc.Message = "probe: " + err.Error()
			return hc
		}
		switch ev.Kind {
		case engine.EventTokens:
			tokens += len(ev.Tokens)
		case engine.EventError:
			hc.Message = "probe failed: " + fromEngine(ev.Err).msg
			return hc
		case engine.EventDone:
			if tokens < 1 {
				hc.Message = "probe generated no token"
				return hc
			}
			hc.State = pb.HealthState_HEALTH_STATE_READY
			hc.Message = fmt.Sprintf("generated %d token in %v", tokens, time.Since(start).Round(time.Microsecond))
			return hc
		}
	}
}

// overall is the worst state of the checks.
func overall(checks []*pb.HealthCheck) pb.HealthState {
	rank := map[pb.HealthState]int{
		pb.HealthState_HEALTH_STATE_READY:     0,
		pb.HealthState_HEALTH_STATE_DEGRADED:  1,
		pb.HealthState_HEALTH_STATE_STARTING:  2,
		pb.HealthState_HEALTH_STATE_DRAINING:  3,
		pb.HealthState_HEALTH_STATE_NOT_READY: 4,
	}
	worst := pb.HealthState_HEALTH_STATE_READY
	for _, c := range checks {
		if rank[c.GetState()] > rank[worst] {
			worst = c.GetState()
		}
	}
	return worst
}

// healthz is liveness: 200 while the process serves HTTP.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "instance_id": s.instanceID})
}

// readyz is readiness: 200 when new requests are admitted, 503 while
// draining.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	checks := s.checks(pb.EngineRole_ENGINE_ROLE_UNSPECIFIED)
	state := overall(checks)
	code := http.StatusOK
	if state != pb.HealthState_HEALTH_STATE_READY && state != pb.HealthState_HEALTH_STATE_DEGRADED {
		code = http.StatusServiceUnavailable
	}
	out := map[string]any{"status": healthName(state)}
	cs := map[string]string{}
	for _, c := range checks {
		cs[c.GetName()] = healthName(c.GetState())
	}
	out["checks"] = cs
	writeJSON(w, code, out)
}

func healthName(s pb.HealthState) string {
	switch s {
	case pb.HealthState_HEALTH_STATE_READY:
		return "ready"
	case pb.HealthState_HEALTH_STATE_DEGRADED:
		return "degraded"
	case pb.HealthState_HEALTH_STATE_DRAINING:
		return "draining"
	case pb.HealthState_HEALTH_STATE_STARTING:
		return "starting"
	}
	return "not_ready"
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
