package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"oengine/engine"
	pb "oengine/proto/openengine/v1"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of every error status.
const ErrorDomain = "oengine"

// ErrorInfo reasons that have no engine code (docs/design.md §1).
const (
	reasonRoleMismatch       = "ROLE_MISMATCH"
	reasonKVSessionNotFound  = "KV_SESSION_NOT_FOUND"
	reasonUnsupportedFeature = "UNSUPPORTED_FEATURE"
	reasonInvalidArgument    = "INVALID_ARGUMENT"
	reasonModelNotFound      = "MODEL_NOT_FOUND"
	reasonDraining           = "DRAINING"
	reasonInternal           = "INTERNAL"
	reasonUnauthenticated    = "UNAUTHENTICATED"
	reasonAdminRequired      = "ADMIN_REQUIRED"
)

// apiError is one row of the error table: how a failure looks before
// acceptance (gRPC code + ErrorInfo reason) and after (EngineError code).
type apiError struct {
	grpc      codes.Code
	reason    string
	engine    pb.ErrorCode
	retryable bool
	msg       string
}

func (e *apiError) Error() string { return e.msg }

// mapping is the error table of docs/design.md §1, keyed by engine code.
var mapping = map[engine.Code]apiError{
	engine.CodeInternal:              {codes.Internal, reasonInternal, pb.ErrorCode_ERROR_CODE_INTERNAL, false, ""},
	engine.CodeInvalidArgument:       {codes.InvalidArgument, reasonInvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, false, ""},
	engine.CodeContextLengthExceeded: {codes.InvalidArgument, "CONTEXT_LENGTH_EXCEEDED", pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, false, ""},
	engine.CodePayloadTooLarge:       {codes.InvalidArgument, "PAYLOAD_TOO_LARGE", pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, false, ""},
	engine.CodeModelNotFound:         {codes.NotFound, reasonModelNotFound, pb.ErrorCode_ERROR_CODE_MODEL_NOT_FOUND, false, ""},
	engine.CodeRequestNotFound:       {codes.NotFound, "REQUEST_NOT_FOUND", pb.ErrorCode_ERROR_CODE_REQUEST_NOT_FOUND, false, ""},
	engine.CodeDuplicateRequest:      {codes.AlreadyExists, "DUPLICATE_REQUEST", pb.ErrorCode_ERROR_CODE_DUPLICATE_REQUEST, false, ""},
	engine.CodeUnsupportedFeature:    {codes.Unimplemented, reasonUnsupportedFeature, pb.ErrorCode_ERROR_CODE_UNSUPPORTED_FEATURE, false, ""},
	engine.CodeOverloaded:            {codes.ResourceExhausted, "OVERLOADED", pb.ErrorCode_ERROR_CODE_OVERLOADED, true, ""},
	engine.CodeDraining:              {codes.Unavailable, reasonDraining, pb.ErrorCode_ERROR_CODE_DRAINING, true, ""},
	engine.CodeCancelled:             {codes.Canceled, "CANCELLED", pb.ErrorCode_ERROR_CODE_CANCELLED, false, ""},
}

// fromEngine classifies any error from the engine. A context error (the
// caller's own cancel or deadline) keeps its gRPC meaning.
func fromEngine(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	switch {
	case errors.Is(err, context.Canceled):
		return &apiError{grpc: codes.Canceled, reason: "CANCELLED", engine: pb.ErrorCode_ERROR_CODE_CANCELLED, msg: "server: request cancelled"}
	case errors.Is(err, context.DeadlineExceeded):
		return &apiError{grpc: codes.DeadlineExceeded, reason: "CANCELLED", engine: pb.ErrorCode_ERROR_CODE_CANCELLED, msg: "server: deadline exceeded"}
	case errors.Is(err, engine.ErrClosed):
		e := mapping[engine.CodeDraining]
		e.msg = err.Error()
		return &e
	}
	var ee *engine.Error
	if !errors.As(err, &ee) {
		e := mapping[engine.CodeInternal]
		e.msg = "server: " + err.Error()
		return &e
	}
	e, ok := mapping[ee.Code]
	if !ok {
		e = mapping[engine.CodeInternal]
	}
	e.msg = ee.Message
	e.retryable = ee.Retryable
	return &e
}

func newAPIError(c codes.Code, reason string, ec pb.ErrorCode, format string, args ...any) *apiError {
	return &apiError{grpc: c, reason: reason, engine: ec, msg: "server: " + fmt.Sprintf(format, args...),
		retryable: c == codes.ResourceExhausted || c == codes.Unavailable}
}

func invalidf(format string, args ...any) *apiError {
	return newAPIError(codes.InvalidArgument, reasonInvalidArgument, pb.ErrorCode_ERROR_CODE_INVALID_ARGUMENT, format, args...)
}

func unsupportedf(format string, args ...any) *apiError {
	return newAPIError(codes.Unimplemented, reasonUnsupportedFeature, pb.ErrorCode_ERROR_CODE_UNSUPPORTED_FEATURE, format, args...)
}

func modelNotFound(name string) *apiError {
	return newAPIError(codes.NotFound, reasonModelNotFound, pb.ErrorCode_ERROR_CODE_MODEL_NOT_FOUND, "model %q is not served here", name)
}

func draining() *apiError {
	return newAPIError(codes.Unavailable, reasonDraining, pb.ErrorCode_ERROR_CODE_DRAINING, "draining: not accepting new requests")
}

// status turns the error into a gRPC status with a google.rpc.ErrorInfo
// detail (domain "oengine").
func (e *apiError) status() *status.Status {
	st := status.New(e.grpc, e.msg)
	info := &errdetails.ErrorInfo{Reason: e.reason, Domain: ErrorDomain}
	if e.retryable {
		info.Metadata = map[string]string{"retryable": "true"}
	}
	if withInfo, err := st.WithDetails(info); err == nil {
		return withInfo
	}
	return st
}

// err is the status as an error, for returning from a handler.
func (e *apiError) err() error { return e.status().Err() }

// event is the terminal EngineError event of an accepted stream.
func (e *apiError) event() *pb.EngineError {
	return &pb.EngineError{Code: e.engine, Message: e.msg, Retryable: e.retryable}
}

// statusErr maps any error to a status error for a unary handler.
func statusErr(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return fromEngine(err).err()
}

// Failure is a classified error as an HTTP surface shows it: the ErrorInfo
// reason and the HTTP column of the error table (docs/design.md §1).
type Failure struct {
	Reason    string // ErrorInfo reason, e.g. OVERLOADED
	Message   string
	Retryable bool
	Status    int    // HTTP status
	Code      string // HTTP error code, e.g. overloaded
}

// httpCodes is the HTTP column of the error table, keyed by ErrorInfo
// reason.
var httpCodes = map[string]struct {
	status int
	code   string
}{
	reasonInvalidArgument:     {http.StatusBadRequest, "invalid_request"},
	"CONTEXT_LENGTH_EXCEEDED": {http.StatusBadRequest, "context_length_exceeded"},
	"PAYLOAD_TOO_LARGE":       {http.StatusRequestEntityTooLarge, "payload_too_large"},
	reasonModelNotFound:       {http.StatusNotFound, "model_not_found"},
	"SESSION_NOT_FOUND":       {http.StatusNotFound, "session_not_found"},
	"SESSION_EXPIRED":         {http.StatusGone, "session_expired"},
	"SESSION_CLOSED":          {http.StatusGone, "session_closed"},
	reasonUnsupportedFeature:  {http.StatusBadRequest, "unsupported_feature"},
	"OVERLOADED":              {http.StatusTooManyRequests, "overloaded"},
	"SESSION_BUDGET":          {http.StatusTooManyRequests, "overloaded"},
	reasonDraining:            {http.StatusServiceUnavailable, "draining"},
	"CANCELLED":               {http.StatusRequestTimeout, "cancelled"},
	"REQUEST_NOT_FOUND":       {http.StatusNotFound, "request_not_found"},
	"DUPLICATE_REQUEST":       {http.StatusConflict, "duplicate_request"},
	"DUPLICATE_SESSION":       {http.StatusConflict, "duplicate_session"},
	"SESSION_BUSY":            {http.StatusConflict, "session_busy"},
	reasonUnauthenticated:     {http.StatusUnauthorized, "unauthenticated"},
	reasonAdminRequired:       {http.StatusForbidden, "admin_required"},
}

// Classify maps an error of the engine, sessions or streaming packages, or
// a gRPC status of this server's services (its ErrorInfo reason), to its
// row of the error table.
func Classify(err error) Failure {
	var ae *apiError
	if !errors.As(err, &ae) {
		if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
			for _, d := range st.Details() {
				if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == ErrorDomain {
					return (&apiError{grpc: st.Code(), reason: info.GetReason(), msg: st.Message(),
						retryable: info.GetMetadata()["retryable"] == "true"}).failure()
				}
			}
		}
	}
	return extError(err).failure()
}

// DrainingFailure is the failure of a request refused while draining.
func DrainingFailure() Failure { return draining().failure() }

func (e *apiError) failure() Failure {
	c, ok := httpCodes[e.reason]
	if !ok {
		c.status, c.code = http.StatusInternalServerError, "internal"
	}
	return Failure{Reason: e.reason, Message: e.msg, Status: c.status, Code: c.code,
		Retryable: e.retryable || c.status == http.StatusTooManyRequests || c.status == http.StatusServiceUnavailable}
}
