package supervisor

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/sandboxd/sandboxd/api"
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
