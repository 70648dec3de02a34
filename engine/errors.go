package engine

import (
	"errors"
	"fmt"
)

// Code classifies an engine error. Each value is one row of the error table
// in docs/design.md §1; only the server turns codes into gRPC codes or HTTP
// statuses.
type Code int

const (
	CodeInternal              Code = iota // anything else
	CodeInvalidArgument                   // malformed or invalid field
	CodeContextLengthExceeded             // prompt + max tokens beyond the context or the pool
	CodePayloadTooLarge                   // prompt too large
	CodeModelNotFound                     // unknown model
	CodeRequestNotFound                   // Abort of an unknown id
	CodeAlreadyFinished                   // Abort of an id that finished within the retention window
	CodeDuplicateRequest                  // live duplicate request id
	CodeUnsupportedFeature                // feature or mode not supported
	CodeOverloaded                        // queue full
	CodeDraining                          // the engine stopped admitting
	CodeCancelled                         // client cancel, deadline, Abort, consumer gone
)

var codeNames = [...]string{
	CodeInternal:              "INTERNAL",
	CodeInvalidArgument:       "INVALID_ARGUMENT",
	CodeContextLengthExceeded: "CONTEXT_LENGTH_EXCEEDED",
	CodePayloadTooLarge:       "PAYLOAD_TOO_LARGE",
	CodeModelNotFound:         "MODEL_NOT_FOUND",
	CodeRequestNotFound:       "REQUEST_NOT_FOUND",
	CodeAlreadyFinished:       "ALREADY_FINISHED",
	CodeDuplicateRequest:      "DUPLICATE_REQUEST",
	CodeUnsupportedFeature:    "UNSUPPORTED_FEATURE",
	CodeOverloaded:            "OVERLOADED",
	CodeDraining:              "DRAINING",
	CodeCancelled:             "CANCELLED",
}

// String returns the docs/design.md §1 reason name (e.g. "CONTEXT_LENGTH_EXCEEDED").
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is every error the engine returns to callers: validation and
// admission errors from Submit (before acceptance) and the terminal error
// event of an accepted request (after acceptance).
type Error struct {
	Code      Code
	Message   string // human-readable, starts with "engine: "
	Retryable bool   // the same request may succeed later (overload, draining)
	Err       error  // underlying cause, if any
}

func (e *Error) Error() string { return e.Message }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by code, so errors.Is(err, ErrNotFound) works.
func (e *Error) Is(target error) bool {
	var t *Error
	if errors.As(target, &t) {
		return t.Code == e.Code && t.Message == ""
	}
	return false
}

// Sentinels for errors.Is: they match any *Error of their code.
var (
	ErrNotFound        = &Error{Code: CodeRequestNotFound}
	ErrAlreadyFinished = &Error{Code: CodeAlreadyFinished}
	ErrDraining        = &Error{Code: CodeDraining}
	ErrOverloaded      = &Error{Code: CodeOverloaded}
	ErrDuplicate       = &Error{Code: CodeDuplicateRequest}
	ErrCancelled       = &Error{Code: CodeCancelled}
	ErrInvalid         = &Error{Code: CodeInvalidArgument}
	ErrContextLength   = &Error{Code: CodeContextLengthExceeded}
	ErrClosed          = errors.New("engine: closed")
)

func newError(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: "engine: " + fmt.Sprintf(format, args...),
		Retryable: c == CodeOverloaded || c == CodeDraining}
}

// wrapError wraps err with a context ("engine: CONTEXT: err"). With an
// empty format the cause, which already names its package (for example
// "sampling: temperature must be >= 0"), is not prefixed twice.
func wrapError(c Code, err error, format string, args ...any) *Error {
	e := newError(c, format, args...)
	if format == "" {
		e.Message += err.Error()
	} else {
		e.Message += ": " + err.Error()
	}
	e.Err = err
	return e
}

// CodeOf returns the code of an *Error in err's chain, CodeInternal
// otherwise.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
