package openai

import (
	"context"
	"io"
	"net/http"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "oengine/proto/openengine/v1"
)

// Generation sessions over HTTP: a JSON mapping of OpenEngineSessions
// (docs/api.md). Bodies are the RPC messages in protojson (proto field
// names), so the rules, limits and error reasons are the gRPC service's
// own: each handler calls the server's registered implementation
// (server.SessionsService) with the request's context, which carries the
// authenticated principal.
//
//	POST   /v1/sessions        OpenGenerationSessionRequest -> GenerationSession (201)
//	GET    /v1/sessions/{id}   ?include_tokens=true          -> GenerationSession
//	PATCH  /v1/sessions/{id}   {"lease_ms": N} (optional)     -> GenerationSession
//	DELETE /v1/sessions/{id}                                  -> CloseGenerationSessionResponse
//
// The owner_instance_id of every ref is this server's: over HTTP the
// session id alone names a session (docs/design.md §3).

var (
	pjIn  = protojson.UnmarshalOptions{DiscardUnknown: false}
	pjOut = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}
)

// sessionsService returns the service, or answers 404 when sessions are
// off.
func (a *api) sessionsService(w http.ResponseWriter) pb.OpenEngineSessionsServer {
	svc := a.s.SessionsService()
	if svc == nil {
		a.reject(w, errorf(http.StatusNotFound, "session_not_found", "", "generation sessions are not enabled on this server"))
	}
	return svc
}

// readProto reads a protojson body into m (an empty body is an empty
// message).
func (a *api) readProto(w http.ResponseWriter, r *http.Request, m proto.Message) *apiError {
	if r.ContentLength > a.cfg.MaxBodyBytes {
		return errorf(http.StatusRequestEntityTooLarge, "payload_too_large", "", "request body of %d bytes exceeds %d bytes", r.ContentLength, a.cfg.MaxBodyBytes)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	if err != nil {
		return errorf(http.StatusRequestEntityTooLarge, "payload_too_large", "", "request body exceeds %d bytes", a.cfg.MaxBodyBytes)
	}
	if len(body) == 0 {
		return nil
	}
	if err := pjIn.Unmarshal(body, m); err != nil {
		return invalid("", "malformed request: %v", err)
	}
	return nil
}

func (a *api) writeProto(w http.ResponseWriter, code int, m proto.Message) {
	b, err := pjOut.Marshal(m)
	if err != nil {
		a.reject(w, errorf(http.StatusInternalServerError, "internal", "", "encoding the response: %v", err))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

func (a *api) ref(r *http.Request) *pb.GenerationSessionRef {
	return &pb.GenerationSessionRef{SessionId: r.PathValue("id"), OwnerInstanceId: a.s.InstanceID()}
}

// call runs one RPC of the service and answers its result or its error.
func (a *api) call(ctx context.Context, w http.ResponseWriter, code int, rpc func(context.Context) (proto.Message, error)) {
	out, err := rpc(ctx)
	if err != nil {
		a.reject(w, classified(err))
		return
	}
	a.writeProto(w, code, out)
}

func (a *api) openSession(w http.ResponseWriter, r *http.Request) {
	svc := a.sessionsService(w)
	if svc == nil {
		return
	}
	req := &pb.OpenGenerationSessionRequest{}
	if aerr := a.readProto(w, r, req); aerr != nil {
		a.reject(w, aerr)
		return
	}
	if req.GetModel() == "" {
		// The default model, as in the completion routes.
		req.Model = a.s.Models()[0].Name
	}
	a.call(r.Context(), w, http.StatusCreated, func(ctx context.Context) (proto.Message, error) {
		return svc.OpenGenerationSession(ctx, req)
	})
}

func (a *api) getSession(w http.ResponseWriter, r *http.Request) {
	svc := a.sessionsService(w)
	if svc == nil {
		return
	}
	include := false
	if v := r.URL.Query().Get("include_tokens"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			a.reject(w, invalid("include_tokens", "include_tokens must be true or false"))
			return
		}
		include = b
	}
	req := &pb.GetGenerationSessionRequest{Ref: a.ref(r), IncludeTokens: include}
	a.call(r.Context(), w, http.StatusOK, func(ctx context.Context) (proto.Message, error) {
		return svc.GetGenerationSession(ctx, req)
	})
}

func (a *api) renewSession(w http.ResponseWriter, r *http.Request) {
	svc := a.sessionsService(w)
	if svc == nil {
		return
	}
	req := &pb.RenewGenerationSessionRequest{}
	if aerr := a.readProto(w, r, req); aerr != nil {
		a.reject(w, aerr)
		return
	}
	req.Ref = a.ref(r)
	a.call(r.Context(), w, http.StatusOK, func(ctx context.Context) (proto.Message, error) {
		return svc.RenewGenerationSession(ctx, req)
	})
}

func (a *api) closeSession(w http.ResponseWriter, r *http.Request) {
	svc := a.sessionsService(w)
	if svc == nil {
		return
	}
	req := &pb.CloseGenerationSessionRequest{Ref: a.ref(r)}
	a.call(r.Context(), w, http.StatusOK, func(ctx context.Context) (proto.Message, error) {
		return svc.CloseGenerationSession(ctx, req)
	})
}
