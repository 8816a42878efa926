// Package errdefs is sandboxd's one error taxonomy: a small closed set of
// classes that every package's errors wrap, so that the API layer maps an
// error to a wire code and HTTP status in exactly one place (containerd's
// errdefs is the model).
//
// It owns the classes and the Error type that carries an operator's fix.
// It must never import another sandboxd package, know about HTTP, or grow
// a class for one call site: a new class is a new wire code in API.md.
package errdefs

import (
	"errors"
	"fmt"
)

// The classes. Each maps to one API error code (see the supervisor's
// mapping); a package error wraps exactly one of them.
var (
	// ErrInvalid: the request cannot be carried out as asked.
	ErrInvalid = errors.New("invalid argument")
	// ErrUnauthenticated: the caller did not prove who it is.
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrForbidden: the caller may not do this (or a path escapes).
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: no such session, file or archive (for this caller).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the target's state does not allow it now.
	ErrConflict = errors.New("conflict")
	// ErrTooLarge: over a per-request size limit.
	ErrTooLarge = errors.New("too large")
	// ErrQuota: a workspace's disk quota would be exceeded.
	ErrQuota = errors.New("quota exceeded")
	// ErrResourceExhausted: a capacity limit (slots, queue, sessions); try later.
	ErrResourceExhausted = errors.New("limit exceeded")
	// ErrUnavailable: the host cannot sandbox now; nothing ran.
	ErrUnavailable = errors.New("unavailable")
	// ErrInternal: a bug.
	ErrInternal = errors.New("internal error")
)

// classes in the order Class tries them; the first match wins.
var classes = []error{
	ErrInvalid, ErrUnauthenticated, ErrForbidden, ErrNotFound, ErrConflict,
	ErrTooLarge, ErrQuota, ErrResourceExhausted, ErrUnavailable, ErrInternal,
}

// Class returns the class err wraps, or ErrInternal when it wraps none
// (an unclassified error is a bug until proven otherwise). The outermost
// *Error in the chain decides: its class was chosen where the failure was
// understood, and its cause may wrap another class (a staging failure
// caused by an invalid path is still whatever the *Error says it is).
func Class(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return e.class
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return c
		}
	}
	return ErrInternal
}

// Error is a classified failure with the reason a caller reads and, when
// an operator can do something about it, the fix.
type Error struct {
	class  error
	Reason string // what went wrong, for the caller
	Fix    string // what an operator does about it; empty when nothing
	Err    error  // the underlying cause, if any
}

// New returns an *Error of class with reason and fix, wrapping cause (which
// may be nil).
func New(class error, reason, fix string, cause error) *Error {
	return &Error{class: class, Reason: reason, Fix: fix, Err: cause}
}

// Error renders the reason, the fix and the cause in the one format used
// everywhere ("reason; fix: fix (cause)").
func (e *Error) Error() string {
	msg := e.Reason
	if e.Fix != "" {
		msg += "; fix: " + e.Fix
	}
	if e.Err != nil {
		msg = fmt.Sprintf("%s (%v)", msg, e.Err)
	}
	return msg
}

// Unwrap exposes both the class and the cause to errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.class}
	}
	return []error{e.class, e.Err}
}

// FixOf returns the operator fix carried by the first *Error in err's
// chain, or "".
func FixOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Fix
	}
	return ""
}
