package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// APIError is an answer that is not 2xx. Status is normally Code.Status();
// the one exception is 405 (see methodNotAllowed).
type APIError struct {
	Status  int
	Code    api.ErrorCode
	Message string
	// RetryAfter, in seconds, is sent as Retry-After when positive.
	RetryAfter int
	// Allow lists the methods of the path for a 405.
	Allow string
}

func (e *APIError) Error() string { return string(e.Code) + ": " + e.Message }

func apiErr(code api.ErrorCode, msg string) *APIError {
	return &APIError{Status: code.Status(), Code: code, Message: msg}
}

// classCodes is the one mapping of the error classes of package errdefs to
// API codes; the HTTP status follows from the code (api.ErrorCode.Status).
// Workspace, session and launch errors all wrap a class, so a workspace
// ErrTooLarge, say, is 413 whether an upload or a staged file hit it.
var classCodes = map[error]api.ErrorCode{
	errdefs.ErrInvalid: api.CodeInvalidArgument,
	// A TCP request without a valid API key (401). A Unix-socket peer
	// whose credentials cannot be read is not this class: it is refused
	// as forbidden, like a peer that is not allowed.
	errdefs.ErrUnauthenticated:   api.CodeUnauthenticated,
	errdefs.ErrForbidden:         api.CodeForbidden,
	errdefs.ErrNotFound:          api.CodeNotFound,
	errdefs.ErrConflict:          api.CodeConflict,
	errdefs.ErrTooLarge:          api.CodeTooLarge,
	errdefs.ErrQuota:             api.CodeQuotaExceeded,
	errdefs.ErrResourceExhausted: api.CodeLimitExceeded,
	errdefs.ErrUnavailable:       api.CodeUnavailable,
	errdefs.ErrInternal:          api.CodeInternal,
}

// codeOf returns the API code of err's class (internal for an error that
// wraps none: unclassified is a bug until proven otherwise).
func codeOf(err error) api.ErrorCode {
	if code, ok := classCodes[errdefs.Class(err)]; ok {
		return code
	}
	return api.CodeInternal
}

// publicMessage is what a caller reads of err: for an *errdefs.Error its
// reason and the operator's fix, rendered by errdefs (the one place that
// spells "; fix: "), never its cause, which is for the supervisor log;
// for any other error its text.
func publicMessage(err error) string {
	var e *errdefs.Error
	if errors.As(err, &e) {
		return errdefs.New(errdefs.Class(e), e.Reason, e.Fix, nil).Error()
	}
	return err.Error()
}

// toAPI is the answer for a classified error: code and status from its
// class, the message from publicMessage, and Retry-After on a capacity
// limit (API.md: limit_exceeded always carries it).
func toAPI(err error) *APIError {
	e := apiErr(codeOf(err), publicMessage(err))
	if e.Code == api.CodeLimitExceeded {
		e.RetryAfter = 1
	}
	return e
}

func writeError(w http.ResponseWriter, e *APIError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	if e.Allow != "" {
		w.Header().Set("Allow", e.Allow)
	}
	writeJSON(w, e.Status, api.ErrorBody{Error: api.ErrorDetail{Code: e.Code, Message: e.Message}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Payload output is returned as written: no \u003c for every "<" of
	// an HTML-printing script. Nothing renders these bodies as HTML.
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a bug gets here (every body is a plain struct); answer with a
		// fixed body rather than a half-written one.
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"encode response"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// methodNotAllowed answers a known path asked with a method it does not
// serve. Decision: 405 with the Allow header, as HTTP requires and generic
// tools expect, and the code invalid_argument, because API.md's code set is
// closed and a wrong method is the caller's mistake about the request. This
// is the only answer whose status is not the one API.md gives its code;
// clients that switch on the code see a code they know.
func methodNotAllowed(allow string) *APIError {
	return &APIError{
		Status:  http.StatusMethodNotAllowed,
		Code:    api.CodeInvalidArgument,
		Message: "method not allowed on this path; allowed: " + allow,
		Allow:   allow,
	}
}
