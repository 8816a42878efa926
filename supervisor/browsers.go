package supervisor

// Requests from browsers. The API has no browser clients, and a web page
// in a browser on the supervisor's host can reach a loopback TCP listener:
// with a "simple" cross-origin POST (no preflight: a body without a JSON
// Content-Type) it runs code blind, and with DNS rebinding (its own name
// resolved to 127.0.0.1 after the page loaded) it reads every answer as
// same-origin. So on every TCP listener a request that carries Origin or a
// Sec-Fetch-Site of another site is refused, and a POST or PATCH must
// declare Content-Type: application/json, which no page can send across
// origins without a preflight this API never answers. On a listener
// without keys, whose every caller is the anonymous one, the Host must
// also be a loopback literal or localhost: a rebinding page's requests
// carry its own name. The Unix socket, which no browser reaches, is
// unaffected.

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"strings"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/launch"
)

// browserRefusal is why a TCP request is refused as a browser's, or nil.
// keyless is set for a listener without keys (--allow-no-auth).
func browserRefusal(r *http.Request, keyless bool) error {
	if len(r.Header.Values("Origin")) > 0 {
		return errdefs.New(errdefs.ErrForbidden, "requests from web pages (an Origin header) are refused: this API has no browser clients", "", nil)
	}
	switch strings.ToLower(r.Header.Get("Sec-Fetch-Site")) {
	case "cross-site", "same-site":
		return errdefs.New(errdefs.ErrForbidden, "requests made by a web page of another site (Sec-Fetch-Site) are refused: this API has no browser clients", "", nil)
	}
	if keyless && !loopbackHost(r.Host) {
		return errdefs.New(errdefs.ErrForbidden, fmt.Sprintf("Host %q is not a loopback address or localhost; a listener without API keys answers only requests addressed to loopback", r.Host),
			"address the listener as 127.0.0.1, [::1] or localhost", nil)
	}
	if (r.Method == http.MethodPost || r.Method == http.MethodPatch) && !declaredJSON(r.Header.Get("Content-Type")) {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("a %s on a TCP listener must carry Content-Type: application/json (it has %q), even without a body", r.Method, r.Header.Get("Content-Type")), "", nil)
	}
	return nil
}

// loopbackHost reports whether a Host header names a loopback literal or
// localhost, with or without a port.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if isLocalhostName(host) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// declaredJSON reports whether a Content-Type is application/json (with
// any parameters; readBody checks the charset).
func declaredJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// refuseBrowser audits (through the refusal limiter, per remote address)
// and answers a TCP request refused by browserRefusal.
func (s *Server) refuseBrowser(w http.ResponseWriter, r *http.Request, p peer, err error) {
	e := toAPI(err)
	rec := s.record(newExecID(), audit.StepAccept, launch.Caller{UID: -1, GID: -1, PID: -1}, e, &facts.Accept{
		Method: r.Method, Path: r.URL.Path, RemoteAddr: p.addr,
	})
	s.auditRefusalAs(refusalKey(rec, p.addr), rec)
	s.log.Info("request refused as a browser's", "remote_addr", p.addr, "method", r.Method, "path", r.URL.Path,
		"host", r.Host, "origin", r.Header.Get("Origin"), "reason", e.Message)
	w.Header().Set("Connection", "close")
	writeError(w, e)
}
