package e2b

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
)

// maxErrorBody bounds how much of an API error answer is read.
const maxErrorBody = 64 << 10

// e2bError is an error the way E2B's API and sandbox routes answer one:
// {"code": <HTTP status>, "message": "..."}.
type e2bError struct {
	Status  int    `json:"code"`
	Message string `json:"message"`
	// sessionGone: the API answered that the session does not exist, so
	// the sandbox is forgotten (a session the TTL reaped leaves no entry).
	sessionGone bool
}

func (e *e2bError) Error() string { return fmt.Sprintf("%d: %s", e.Status, e.Message) }

func errorf(status int, format string, args ...any) *e2bError {
	return &e2bError{Status: status, Message: fmt.Sprintf(format, args...)}
}

// unsupported answers what sandboxd does not do, naming it.
func unsupported(what string) *e2bError {
	return errorf(http.StatusNotImplemented, "sandboxd's E2B endpoint does not support %s (see docs/E2B.md)", what)
}

// apiError reads a sandboxd error answer (closing its body) into the E2B
// shape, keeping the status and the API's code and message.
func apiError(res *response) *e2bError {
	defer res.body.Close()
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	b, _ := io.ReadAll(io.LimitReader(res.body, maxErrorBody))
	if err := json.Unmarshal(b, &body); err != nil || body.Error.Code == "" {
		return errorf(res.status, "sandboxd answered %d", res.status)
	}
	e := errorf(res.status, "sandboxd: %s: %s", body.Error.Code, body.Error.Message)
	e.sessionGone = res.status == http.StatusNotFound && body.Error.Message == noSuchSession
	return e
}

// noSuchSession is the API's message for a session that does not exist
// (for the caller); a file that does not exist has another.
const noSuchSession = "no such session"

// writeJSON writes v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeErr answers err, an *e2bError or any other error (a 500).
func (s *Server) writeErr(w http.ResponseWriter, r *http.Request, err error) {
	e, ok := err.(*e2bError) //nolint:errorlint // only this package's own errors, never wrapped
	if !ok {
		s.log.Error("e2b request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		e = errorf(http.StatusInternalServerError, "internal error; see the supervisor log")
	}
	s.forgetIfGone(r, e)
	s.log.Debug("e2b request refused", slog.Int("status", e.Status), "method", r.Method, "path", r.URL.Path, "message", e.Message)
	writeJSON(w, e.Status, e)
}
