package supervisor

// Authentication of TCP callers: a request on a TCP listener names its
// caller with "Authorization: Bearer <key>", checked against the
// operator's keys file (package apikey). A Unix-socket request is judged by
// its peer credentials as before and never reads the header.
//
// A failed attempt is answered 401 after a fixed delay from the request's
// arrival, with one message whatever was wrong (no header, another scheme,
// a wrong key), so neither the answer nor its time tells an attacker which
// part was wrong; and the address's failures are counted, past a bound a
// 429 without even comparing (authFailures). Only an address's own
// failures ever refuse it: the table of counts evicts when full, it never
// makes addresses share a count.

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/apikey"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/launch"
)

const (
	// defaultAuthFailDelay is how long after its arrival a failed attempt
	// is answered. It is not a defence on its own (the HMAC comparison is
	// already constant-time) but it makes guessing slow and hides the
	// little a request's own processing might vary.
	defaultAuthFailDelay = 250 * time.Millisecond
	// authFailLimit failures from one address within authFailWindow and
	// the address is answered 429 until the window ends.
	authFailLimit  = 10
	authFailWindow = time.Minute
	// authFailTable bounds the addresses tracked. A new address in a full
	// table evicts the entry with the fewest failures, so a flood of
	// addresses failing once each cannot evict a guesser's count, and no
	// address is ever judged by another's failures.
	authFailTable = 4096
)

// unauthenticatedMsg is the one message of every 401.
const unauthenticatedMsg = "missing or invalid API key: send Authorization: Bearer <key>"

// noAuthKeyName is the caller identity of TCP requests when the operator
// allowed no authentication (--allow-no-auth, loopback only).
const noAuthKeyName = "anonymous"

// Auth is the TCP listeners' authentication setting.
type Auth struct {
	// Keys are the API keys; nil means no authentication, which the
	// configuration allows only with --allow-no-auth on loopback.
	Keys *apikey.Set
}

// isTCP reports whether c came in on a TCP listener (also under TLS).
func isTCP(c net.Conn) bool {
	_, ok := c.LocalAddr().(*net.TCPAddr)
	return ok
}

// remoteIP is c's remote IP address as text (no port: a client picks a new
// port per connection).
func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// failKey is the failure-counting key of a remote address: the IPv4
// address, or the /64 of an IPv6 one (a single host usually holds a whole
// /64, and counting per /128 would give it 2^64 fresh counters).
func failKey(addr string) string {
	ip := net.ParseIP(addr)
	if ip == nil || ip.To4() != nil {
		return addr
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
// The scheme is case-insensitive (RFC 7235); exactly one header, one space.
func bearer(r *http.Request) (string, bool) {
	hs := r.Header.Values("Authorization")
	if len(hs) != 1 {
		return "", false
	}
	scheme, tok, ok := strings.Cut(hs[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", false
	}
	return tok, true
}

// authenticateTCP resolves the caller of a TCP request, or answers it
// (401 or 429) and returns false.
func (s *Server) authenticateTCP(w http.ResponseWriter, r *http.Request, p peer) (*http.Request, bool) {
	start := time.Now()
	auth := s.auth.Load()
	if err := browserRefusal(r, auth == nil || auth.Keys == nil); err != nil {
		s.refuseBrowser(w, r, p, err)
		return nil, false
	}
	if auth == nil || auth.Keys == nil {
		return s.admitTCPCaller(w, r, p, launch.Caller{UID: -1, GID: -1, PID: -1, Key: noAuthKeyName})
	}
	who := failKey(p.addr)
	if wait, limited := s.authFails.limited(who, start); limited {
		s.refuseAuth(w, r, p, retryAfter(toAPI(errdefs.New(errdefs.ErrResourceExhausted,
			"too many failed authentication attempts from this address; retry later", "", nil)), wait), "rate_limited")
		return nil, false
	}
	tok, _ := bearer(r)
	// Match runs for a missing header too (on the empty string), so the
	// work done is the same whatever was wrong.
	k, ok := auth.Keys.Match(tok)
	if ok {
		c := launch.Caller{UID: -1, GID: -1, PID: -1, Key: k.Name, Admin: k.Admin, Egress: k.Egress}
		return s.admitTCPCaller(w, r, p, c)
	}
	s.authFails.fail(who, start)
	if d := s.authFailDelay - time.Since(start); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
	}
	s.refuseAuth(w, r, p, toAPI(errdefs.New(errdefs.ErrUnauthenticated, unauthenticatedMsg, "", nil)), "bad_key")
	return nil, false
}

// admitTCPCaller attaches the authenticated caller c to r and moves its
// connection from the listener's unauthenticated budget to c's share
// (callerLimits.authenticated); a caller over its share is answered 429.
func (s *Server) admitTCPCaller(w http.ResponseWriter, r *http.Request, p peer, c launch.Caller) (*http.Request, bool) {
	if err := s.limits.authenticated(p.conn, c.ID()); err != nil {
		e := toAPI(err)
		s.auditRefusal(s.record(newExecID(), audit.StepAccept, c, e, &facts.Accept{Method: r.Method, Path: r.URL.Path}))
		w.Header().Set("Connection", "close")
		writeError(w, e)
		return nil, false
	}
	p.caller, p.err = c, nil
	return r.WithContext(context.WithValue(r.Context(), peerKey{}, p)), true
}

// retryAfter sets e's Retry-After to wait, in whole seconds (at least 1).
func retryAfter(e *APIError, wait time.Duration) *APIError {
	e.RetryAfter = max(1, int((wait+time.Second-1)/time.Second))
	return e
}

// refuseAuth audits (through the refusal limiter, per remote address) and
// answers a refused TCP request. The record names the address, never the
// presented key.
func (s *Server) refuseAuth(w http.ResponseWriter, r *http.Request, p peer, e *APIError, why string) {
	caller := launch.Caller{UID: -1, GID: -1, PID: -1}
	rec := s.record(newExecID(), audit.StepAccept, caller, e, &facts.Accept{
		Method: r.Method, Path: r.URL.Path, RemoteAddr: p.addr, Auth: why,
	})
	s.auditRefusalAs(refusalKey(rec, p.addr), rec)
	s.log.Info("request unauthenticated", "remote_addr", p.addr, "method", r.Method, "path", r.URL.Path, "reason", why)
	if e.Code == api.CodeUnauthenticated {
		w.Header().Set("WWW-Authenticate", `Bearer realm="sandboxd"`)
	}
	// A peer that has not authenticated keeps no idle connection: it would
	// hold a place in the listener's unauthenticated budget for nothing.
	w.Header().Set("Connection", "close")
	writeError(w, e)
}

// refusalKey is the key the refusal limiter holds a record under: the
// caller's identity ("uid:<n>", "key:<name>"), so that one caller's burst
// never hides another's refusals; for a TCP request refused before it has
// a caller (remote non-empty), its remote address as the failure counter
// keys it (failKey: an IPv4 address, an IPv6 /64), so one guesser cannot
// hide the attempts of every other address under its own aggregate.
func refusalKey(rec audit.Record, remote string) string {
	switch {
	case remote != "":
		return "addr:" + failKey(remote)
	case rec.Caller != "":
		return rec.Caller
	}
	return "uid:" + strconv.Itoa(rec.CallerUID)
}

// authFailures counts failed attempts per address in fixed windows, in a
// table of bounded size.
type authFailures struct {
	mu     sync.Mutex
	limit  int
	window time.Duration
	max    int
	m      map[string]*failWindow
}

type failWindow struct {
	start time.Time
	n     int
}

func newAuthFailures(limit int, window time.Duration, max int) *authFailures {
	return &authFailures{limit: limit, window: window, max: max, m: map[string]*failWindow{}}
}

// limited reports whether addr is over its own failures and for how long.
// An address without an entry is never limited, however full the table.
func (a *authFailures) limited(addr string, now time.Time) (time.Duration, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.m[addr]
	if w == nil || now.Sub(w.start) >= a.window || w.n < a.limit {
		return 0, false
	}
	return a.window - now.Sub(w.start), true
}

// fail counts a failure of addr, making room in a full table first.
func (a *authFailures) fail(addr string, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.m[addr]
	if w == nil {
		if len(a.m) >= a.max {
			a.evict(now)
		}
		w = &failWindow{start: now}
		a.m[addr] = w
	}
	if now.Sub(w.start) >= a.window {
		w.start, w.n = now, 0
	}
	w.n++
}

// evict drops the ended windows or, when none has ended, the entry with
// the fewest failures (the oldest of those): losing it forgets the least.
// A flood of fresh addresses thus evicts its own entries, not a guesser's.
func (a *authFailures) evict(now time.Time) {
	var victim string
	var vw *failWindow
	for k, w := range a.m {
		if now.Sub(w.start) >= a.window {
			delete(a.m, k)
			continue
		}
		if vw == nil || w.n < vw.n || w.n == vw.n && w.start.Before(vw.start) {
			victim, vw = k, w
		}
	}
	if len(a.m) >= a.max && vw != nil {
		delete(a.m, victim)
	}
}

// size is the number of addresses tracked (tests).
func (a *authFailures) size() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.m)
}

// handleHealthz serves GET /healthz on every listener without
// authentication, for load balancers: it says the process answers and its
// version, and nothing else (no checks, no runtimes, no caller).
func (s *Server) handleHealthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, api.Liveness{OK: true, Version: s.version})
}

// String is for logs.
func (a Auth) String() string {
	if a.Keys == nil {
		return "none"
	}
	return fmt.Sprintf("%d api keys", a.Keys.Len())
}

// keysStatus is what GET /v1/health tells of the keys file: when its keys
// were loaded, and the last reload that failed since then.
type keysStatus struct {
	mu        sync.Mutex
	loaded    bool
	loadedAt  time.Time
	count     int
	lastErr   string
	lastErrAt time.Time
}

// LoadKeys reads the keys file at path and makes its keys the TCP
// listeners' keys (SetAuth). A file that fails validation changes nothing;
// the error says why. Use it at start; ReloadKeys on SIGHUP.
func (s *Server) LoadKeys(path string) error {
	keys, err := apikey.Load(path, s.selfUID)
	if err != nil {
		return err
	}
	s.SetAuth(Auth{Keys: keys})
	s.keys.mu.Lock()
	s.keys.loaded, s.keys.loadedAt, s.keys.count = true, time.Now().UTC(), keys.Len()
	s.keys.lastErr, s.keys.lastErrAt = "", time.Time{}
	s.keys.mu.Unlock()
	s.log.Info("api keys loaded", "file", path, "names", keys.Names())
	return nil
}

// ReloadKeys is LoadKeys for a reload: a file that fails validation keeps
// the keys in force — including any the new file meant to revoke, which the
// operator must hear about — so the failure is logged as an error, audited
// (a failed keys.reload record) and shown in GET /v1/health until a reload
// succeeds. A reload that succeeds is audited with the names in force.
func (s *Server) ReloadKeys(path string) error {
	err := s.LoadKeys(path)
	f := &facts.KeysReload{File: path, Trigger: "SIGHUP"}
	if err != nil {
		s.log.Error("API keys not reloaded; the keys loaded before stay in force, including any the file meant to revoke", "file", path, "err", err)
		s.keys.mu.Lock()
		s.keys.lastErr, s.keys.lastErrAt = err.Error(), time.Now().UTC()
		s.keys.mu.Unlock()
	} else if a := s.auth.Load(); a != nil && a.Keys != nil {
		f.Names = a.Keys.Names()
	}
	rec := s.record(newExecID(), facts.StepKeysReload, launch.Caller{UID: -1, GID: -1, PID: -1}, nil, f)
	if err != nil {
		rec.OK, rec.Error = false, err.Error()
	}
	if aerr := s.writeAudit(rec); aerr != nil {
		s.log.Error("audit write failed for a keys reload", "err", aerr)
	}
	return err
}

// keysHealth is the keys section of GET /v1/health; nil without a keys
// file (no TCP listener, or --allow-no-auth).
func (s *Server) keysHealth() *api.KeysHealth {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if !s.keys.loaded {
		return nil
	}
	h := &api.KeysHealth{LoadedAt: s.keys.loadedAt, Keys: s.keys.count, LastReloadError: s.keys.lastErr}
	if s.keys.lastErr != "" {
		at := s.keys.lastErrAt
		h.LastReloadErrorAt = &at
	}
	return h
}
