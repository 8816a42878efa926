package e2b

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
)

// The ports E2B's SDK names in E2b-Sandbox-Port.
const (
	portEnvd    = "49983"
	portJupyter = "49999"
)

// envdVersion is the envd version the sandboxes claim: recent enough that
// the SDK sends no default user and uploads as multipart, old enough that
// it refuses file metadata on its own (sandboxd has none).
const envdVersion = "0.5.7"

// Server is the E2B-compatible endpoint. It is an http.Handler meant to be
// mounted on its own listener in front of the supervisor (supervisor.Server
// Mount), with api the supervisor's Handler.
type Server struct {
	api http.Handler
	log *slog.Logger
	reg *registry
}

// New returns the endpoint translating to api. log may be nil.
func New(api http.Handler, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{api: api, log: log, reg: newRegistry()}
}

// ServeHTTP routes a request: with E2b-Sandbox-Id to the sandbox's port
// (the code interpreter or envd), else to the control API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/healthz" {
		s.api.ServeHTTP(w, r)
		return
	}
	id := r.Header.Get("E2b-Sandbox-Id")
	if id == "" {
		s.serveControl(w, r)
		return
	}
	sb, err := s.sandboxFor(r, id)
	if err != nil {
		s.writeErr(w, r, err)
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), sandboxKey{}, sb))
	switch port := r.Header.Get("E2b-Sandbox-Port"); port {
	case portJupyter:
		s.serveJupyter(w, r, sb)
	case portEnvd:
		s.serveEnvd(w, r, sb)
	default:
		s.writeErr(w, r, unsupported("sandbox port "+quote(port)+" (49999: code, 49983: files)"))
	}
}

// sandboxKey carries the sandbox of a sandbox route in its context.
type sandboxKey struct{}

// forgetIfGone drops the sandbox of r when the API said its session is gone.
func (s *Server) forgetIfGone(r *http.Request, e *e2bError) {
	if sb, ok := r.Context().Value(sandboxKey{}).(*sandbox); ok && e.sessionGone {
		s.reg.remove(sb.id)
		s.log.Info("e2b sandbox gone", "sandbox_id", sb.id)
	}
}

// sandboxFor finds the sandbox of a sandbox route and checks its access
// token (X-Access-Token, or E2B-Traffic-Access-Token, which the SDK sends
// on the context routes instead).
func (s *Server) sandboxFor(r *http.Request, id string) (*sandbox, error) {
	sb := s.reg.get(id)
	if sb == nil {
		// 502 is what E2B's proxy answers for a sandbox that is gone; the
		// SDK reads it as "not running".
		return nil, errorf(http.StatusBadGateway, "sandbox %q not found", id)
	}
	tok := r.Header.Get("X-Access-Token")
	if tok == "" {
		tok = r.Header.Get("E2b-Traffic-Access-Token")
	}
	if !sb.tokenOK(tok) {
		// Never the token itself in the log.
		s.log.Info("e2b request with a missing or wrong access token", "sandbox_id", id,
			"remote_addr", r.RemoteAddr, "method", r.Method, "path", r.URL.Path)
		return nil, errorf(http.StatusUnauthorized, "missing or wrong access token for sandbox %q", id)
	}
	return sb, nil
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
