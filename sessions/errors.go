package sessions

import (
	"errors"
	"fmt"
)

// Code classifies a sessions error; the server maps each code to a gRPC
// status and an ErrorInfo reason (docs/design.md §1).
type Code int

const (
	CodeInternal      Code = iota
	CodeNotFound           // SESSION_NOT_FOUND: unknown, or tombstone past retention
	CodeExpired            // SESSION_EXPIRED: lease ran out (tombstone)
	CodeClosed             // SESSION_CLOSED: closed (tombstone)
	CodeOwnerMismatch      // OWNER_MISMATCH: the ref names another instance
	CodeBusy               // SESSION_BUSY: a mutating turn is running
	CodeDuplicate          // DUPLICATE_SESSION: caller id already live or tombstoned
	CodeBudget             // SESSION_BUDGET: session count or pinned-page budget exhausted
	CodeInvalid            // INVALID_ARGUMENT
	CodeUnsupported        // UNSUPPORTED_FEATURE: a mode or feature not offered
	CodeModelNotFound      // MODEL_NOT_FOUND: Open names an unknown model
)

var codeNames = [...]string{
	CodeInternal:      "INTERNAL",
	CodeNotFound:      "SESSION_NOT_FOUND",
	CodeExpired:       "SESSION_EXPIRED",
	CodeClosed:        "SESSION_CLOSED",
	CodeOwnerMismatch: "OWNER_MISMATCH",
	CodeBusy:          "SESSION_BUSY",
	CodeDuplicate:     "DUPLICATE_SESSION",
	CodeBudget:        "SESSION_BUDGET",
	CodeInvalid:       "INVALID_ARGUMENT",
	CodeUnsupported:   "UNSUPPORTED_FEATURE",
	CodeModelNotFound: "MODEL_NOT_FOUND",
}

// String returns the ErrorInfo reason of docs/design.md §1.
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is every error the package returns to callers.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return "sessions: " + e.Message }

// Is makes errors.Is(err, ErrBusy) etc. match any *Error of that code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Message == "" && t.Code == e.Code
}

func errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is.
var (
	ErrNotFound      = &Error{Code: CodeNotFound}
	ErrExpired       = &Error{Code: CodeExpired}
	ErrClosed        = &Error{Code: CodeClosed}
	ErrOwnerMismatch = &Error{Code: CodeOwnerMismatch}
	ErrBusy          = &Error{Code: CodeBusy}
	ErrDuplicate     = &Error{Code: CodeDuplicate}
	ErrBudget        = &Error{Code: CodeBudget}
	ErrInvalid       = &Error{Code: CodeInvalid}
	ErrUnsupported   = &Error{Code: CodeUnsupported}
	ErrModelNotFound = &Error{Code: CodeModelNotFound}
)

// CodeOf returns the code of a sessions error, CodeInternal for others.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}
