package supervisor

// Per-caller limits at the front door (DESIGN.md I11, "no caller can starve
// another"): how many connections one caller holds open, and how many
// request-body bytes it may have in memory at once. A caller is an identity
// (Caller.ID): "uid:N" for a Unix-socket peer, "key:<name>" for an API key.
// Both act before any handler reads a byte of the request, so a hostile
// caller spends its own share and nobody else's. The exec queue share is
// package admission's; the session share is the SessionStore's.
//
// Connections are budgeted per listener: the Unix socket and each TCP
// listener hold at most --max-connections each, so no TCP peer can take
// the local callers' connections. A TCP connection is accepted before any
// request names its key; until one does it is unauthenticated and counted
// in its listener's small unauthenticated budget, under its remote address
// (an IPv4 address, an IPv6 /64), and moves to its key's share at its
// first authenticated request.

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/admission"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/launch"
)

// refusalInterval is how often one caller's refusals reach the audit log
// one by one; the rest are counted (audit.RefusalLimiter).
const refusalInterval = time.Second

// connRefusalWriteTimeout bounds the write of the 429 to a refused
// connection: the accept loop must never wait on a peer that does not read.
const connRefusalWriteTimeout = 100 * time.Millisecond

// Reasons a connection is refused, the label values of
// sandboxd_connections_refused_total.
const (
	connRefusedCaller = "caller" // the caller (or the unauthenticated address) holds its share already
	connRefusedGlobal = "global" // the listener holds its maximum
	// the TCP listener's connections without an authenticated request
	// hold their budget
	connRefusedUnauthenticated = "unauthenticated"
)

// unixPool is the connection budget of the Unix socket; a TCP listener's
// is named by tcpPool.
const unixPool = "unix"

// connEntry is an admitted connection: the budget it counts in and the
// identity whose share it takes.
type connEntry struct {
	pool   string
	who    string
	unauth bool // a TCP connection no request has authenticated yet
}

// callerLimits counts connections and in-flight body bytes per caller.
type callerLimits struct {
	// maxConns is each listener's budget; maxConnsPerCaller one caller's
	// share of the connections of all listeners.
	maxConns, maxConnsPerCaller int
	// maxUnauth is a TCP listener's budget for unauthenticated
	// connections, maxUnauthPerAddr one remote address's share of it.
	maxUnauth, maxUnauthPerAddr int
	bodyBudget                  int64
	log                         *slog.Logger
	// refused is told about every refused connection (for the audit log).
	refused func(c launch.Caller, reason, msg string)

	mu          sync.Mutex
	conns       map[net.Conn]*connEntry // admitted connections
	perCaller   map[string]int          // by identity
	pools       map[string]int          // open connections by listener
	unauth      map[string]int          // unauthenticated connections by TCP listener
	total       int
	bodies      map[string]int64 // body bytes reserved, by caller identity
	connRefused map[string]uint64
	bodyRefused uint64
}

func newCallerLimits(maxConns, perCaller int, bodyBudget int64, log *slog.Logger) *callerLimits {
	// A quarter of a listener's budget for connections not yet
	// authenticated, a quarter of that for one address: a legitimate
	// client opening a burst of connections fits, a flood from a few
	// addresses does not, and authenticated callers keep the rest.
	unauth := max(1, maxConns/4)
	return &callerLimits{maxConns: maxConns, maxConnsPerCaller: perCaller, bodyBudget: bodyBudget, log: log,
		maxUnauth: unauth, maxUnauthPerAddr: max(1, min(perCaller, unauth/4)),
		conns: map[net.Conn]*connEntry{}, perCaller: map[string]int{}, pools: map[string]int{}, unauth: map[string]int{},
		bodies: map[string]int64{}, connRefused: map[string]uint64{}}
}

// connState is http.Server.ConnState. net/http calls it with StateNew in
// its accept loop, before the connection's goroutine starts, so a refused
// connection is answered and closed before anything reads from it; and
// with StateClosed or StateHijacked exactly once at its end. This is the
// LimitListener of the design, placed here so that the connection net/http
// serves stays the *net.UnixConn that peer credentials are read from.
func (l *callerLimits) connState(c net.Conn, st http.ConnState) {
	switch st {
	case http.StateNew:
		l.admitConn(c)
	case http.StateClosed, http.StateHijacked:
		l.mu.Lock()
		if e, ok := l.conns[c]; ok {
			delete(l.conns, c)
			l.total--
			decr(l.pools, e.pool)
			decr(l.perCaller, e.who)
			if e.unauth {
				decr(l.unauth, e.pool)
			}
		}
		l.mu.Unlock()
	}
}

// decr takes one from m[k], dropping the key at zero.
func decr(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// connIdentity is who a connection is counted under at accept: the peer's
// uid on a Unix socket; on TCP, where the key comes later with a request,
// the remote address as the failure counter keys it (an IPv4 address, an
// IPv6 /64: one host holds a whole /64).
func connIdentity(c net.Conn) (launch.Caller, string) {
	if isTCP(c) {
		return launch.Caller{UID: -1, GID: -1, PID: -1}, "addr:" + failKey(remoteIP(c))
	}
	caller, err := peerCredentials(c)
	if err != nil {
		// Counted under -1, never under uid 0; authorize refuses it.
		caller = launch.Caller{UID: -1, GID: -1, PID: -1}
	}
	return caller, caller.ID()
}

func (l *callerLimits) admitConn(c net.Conn) {
	caller, who := connIdentity(c)
	e := &connEntry{pool: unixPool, who: who}
	if isTCP(c) {
		e.pool, e.unauth = tcpPool(c), true
	}
	l.mu.Lock()
	reason, held := l.admitLocked(c, e)
	l.mu.Unlock()
	if reason == "" {
		return
	}
	msg := fmt.Sprintf("%s holds %d connections, its share (--max-connections-per-caller %d); close one or retry later", who, held, l.maxConnsPerCaller)
	switch {
	case reason == connRefusedGlobal:
		msg = fmt.Sprintf("the listener holds %d connections, its maximum (--max-connections); retry later", l.maxConns)
	case reason == connRefusedUnauthenticated:
		msg = fmt.Sprintf("the listener holds %d connections that have not authenticated yet, its budget for them (a quarter of --max-connections); retry later", l.maxUnauth)
	case e.unauth:
		msg = fmt.Sprintf("%s holds %d connections that have not authenticated yet, its share; retry later", who, held)
	}
	l.log.Warn("connection refused", "reason", reason, "listener", e.pool, "caller", who, "caller_uid", caller.UID, "caller_pid", caller.PID, "held", held)
	writeRawError(c, limitExceeded(msg))
	_ = c.Close()
	if l.refused != nil {
		l.refused(caller, reason, msg)
	}
}

// admitLocked counts e for c, or returns why not ("" when admitted) and
// how many connections the identity holds.
func (l *callerLimits) admitLocked(c net.Conn, e *connEntry) (string, int) {
	share := l.maxConnsPerCaller
	if e.unauth {
		share = l.maxUnauthPerAddr
	}
	held := l.perCaller[e.who]
	switch {
	case l.pools[e.pool] >= l.maxConns:
		l.connRefused[connRefusedGlobal]++
		return connRefusedGlobal, held
	case e.unauth && l.unauth[e.pool] >= l.maxUnauth:
		l.connRefused[connRefusedUnauthenticated]++
		return connRefusedUnauthenticated, held
	case held >= share:
		l.connRefused[connRefusedCaller]++
		return connRefusedCaller, held
	}
	l.conns[c] = e
	l.perCaller[e.who]++
	l.pools[e.pool]++
	l.total++
	if e.unauth {
		l.unauth[e.pool]++
	}
	return "", held
}

// authenticated moves the TCP connection c, whose request authenticated
// as who, from its listener's unauthenticated budget to who's share. A
// connection already counted under a caller stays where it is (a later
// request with another key does not move it again). The error is a
// capacity refusal when who holds its share already.
func (l *callerLimits) authenticated(c net.Conn, who string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.conns[c]
	if !ok || !e.unauth {
		return nil
	}
	if held := l.perCaller[who]; held >= l.maxConnsPerCaller {
		l.connRefused[connRefusedCaller]++
		return errdefs.New(errdefs.ErrResourceExhausted, fmt.Sprintf(
			"%s holds %d connections, its share (--max-connections-per-caller %d); close one or retry later", who, held, l.maxConnsPerCaller), "", nil)
	}
	decr(l.perCaller, e.who)
	decr(l.unauth, e.pool)
	e.who, e.unauth = who, false
	l.perCaller[who]++
	return nil
}

// writeRawError writes a complete HTTP/1.1 error answer on a connection no
// handler serves, so the refused client reads a 429 with Retry-After, as
// from any other limit, rather than a bare hang-up.
func writeRawError(c net.Conn, e *APIError) {
	rec := newBufferedResponse()
	writeError(rec, e)
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", rec.status, http.StatusText(rec.status))
	for k, vs := range rec.h {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n%s", rec.body.Len(), rec.body.String())
	_ = c.SetWriteDeadline(time.Now().Add(connRefusalWriteTimeout))
	_, _ = c.Write([]byte(b.String()))
}

// bufferedResponse is the least http.ResponseWriter writeError needs.
type bufferedResponse struct {
	h      http.Header
	status int
	body   strings.Builder
}

func newBufferedResponse() *bufferedResponse { return &bufferedResponse{h: http.Header{}} }

func (r *bufferedResponse) Header() http.Header         { return r.h }
func (r *bufferedResponse) WriteHeader(status int)      { r.status = status }
func (r *bufferedResponse) Write(p []byte) (int, error) { return r.body.Write(p) }

// reserveBody takes n bytes of the caller who's body budget; false when
// they do not fit. release gives them back (idempotent).
func (l *callerLimits) reserveBody(who string, n int64) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bodies[who]+n > l.bodyBudget {
		l.bodyRefused++
		return nil, false
	}
	l.bodies[who] += n
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.bodies[who] -= n; l.bodies[who] <= 0 {
				delete(l.bodies, who)
			}
		})
	}, true
}

// writeMetrics appends the limits' metrics to /metrics.
func (l *callerLimits) writeMetrics(w http.ResponseWriter) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	b.WriteString("# HELP sandboxd_connections_open API connections open now.\n# TYPE sandboxd_connections_open gauge\n")
	fmt.Fprintf(&b, "sandboxd_connections_open %d\n", l.total)
	b.WriteString("# HELP sandboxd_connections_refused_total Connections refused: the caller's (or unauthenticated address's) share, the listener's maximum, or a TCP listener's budget for unauthenticated connections was held.\n")
	b.WriteString("# TYPE sandboxd_connections_refused_total counter\n")
	for _, r := range []string{connRefusedCaller, connRefusedGlobal, connRefusedUnauthenticated} {
		fmt.Fprintf(&b, "sandboxd_connections_refused_total{reason=%q} %d\n", r, l.connRefused[r])
	}
	b.WriteString("# HELP sandboxd_bodies_refused_total Requests refused before their body was read: the caller's body budget was in use.\n")
	b.WriteString("# TYPE sandboxd_bodies_refused_total counter\n")
	fmt.Fprintf(&b, "sandboxd_bodies_refused_total %d\n", l.bodyRefused)
	_, _ = w.Write([]byte(b.String()))
}

// limitBodies guards the requests whose bodies are read into memory (every
// POST: execs and session creation). Before a byte of the body is read it
// asks the gate, for an exec, whether the caller could run or wait at all,
// then takes the caller's budget for the body — the Content-Length, or the
// maximum body when the length is unknown — until the request is answered
// (an exec's decoded request stays in memory while it runs). Either
// refusal is a 429 that cost the supervisor no memory. Uploads (PUT) stream
// to disk and are bounded by the workspace quota instead.
func (s *Server) limitBodies(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		caller, _ := callerFrom(r.Context()) // authorize ran first
		if strings.HasSuffix(r.URL.Path, "/exec") {
			if err := s.gate.Check(caller.ID()); err != nil {
				s.refuseEarly(w, r, caller, s.queueRefusal(caller, err))
				return
			}
		}
		want := s.cfg.MaxBodyBytes
		if r.ContentLength >= 0 && r.ContentLength < want {
			want = r.ContentLength
		}
		release, ok := s.limits.reserveBody(caller.ID(), want)
		if !ok {
			s.refuseEarly(w, r, caller, limitExceeded(fmt.Sprintf(
				"%s has request bodies in flight up to its budget of %d bytes (--caller-body-budget); retry later",
				caller.ID(), s.cfg.CallerBodyBudget)))
			return
		}
		defer release()
		next.ServeHTTP(w, r)
	})
}

// queueRefusal is the 429 for an exec the gate will not take.
func (s *Server) queueRefusal(caller launch.Caller, err error) *APIError {
	if errors.Is(err, admission.ErrShareFull) {
		s.metrics.mu.Lock()
		s.metrics.queueShareRefused++
		s.metrics.mu.Unlock()
		return limitExceeded(fmt.Sprintf("%s already has execs waiting for a slot: %d waiting, its share of the queue (--max-queued-execs-per-caller); retry later",
			caller.ID(), s.cfg.QueueShare()))
	}
	return limitExceeded(fmt.Sprintf("%d execs are running and %d waiting, the operator's maximum; retry later", s.gate.Max(), s.cfg.MaxQueuedExecs))
}

// refuseEarly answers a request refused before its body was read. Its
// accept record goes through the refusal limiter: one record per caller
// per interval, the rest counted.
func (s *Server) refuseEarly(w http.ResponseWriter, r *http.Request, caller launch.Caller, e *APIError) {
	execID := newExecID()
	if strings.HasSuffix(r.URL.Path, "/exec") {
		w.Header().Set(api.ExecIDHeader, execID)
		s.metrics.exec(OutcomeRefused)
		s.metrics.refuse(e.Code)
	}
	contentLength, bodyRead := r.ContentLength, false
	s.auditRefusal(s.record(execID, audit.StepAccept, caller, e, &facts.Accept{
		Method: r.Method, Path: r.URL.Path, ContentLength: &contentLength, BodyRead: &bodyRead,
	}))
	s.log.Info("request refused before its body was read", "caller", caller.ID(), "path", r.URL.Path, "reason", e.Message)
	// The body is left unread: net/http closes a connection whose body was
	// not consumed, so a slow or huge sender loses its connection too.
	w.Header().Set("Connection", "close")
	writeError(w, e)
}

// auditRefusal writes a refusal record, at most one per caller per
// refusalInterval (audit.RefusalLimiter); a failure is logged, since the
// request is refused either way.
func (s *Server) auditRefusal(rec audit.Record) {
	s.auditRefusalAs(refusalKey(rec, ""), rec)
}

// auditRefusalAs is auditRefusal under the limiter key key (refusalKey).
func (s *Server) auditRefusalAs(key string, rec audit.Record) {
	if s.refusals == nil {
		if err := s.writeAudit(rec); err != nil {
			s.log.Error("audit write failed for a refused request", "err", err)
		}
		return
	}
	written, err := s.refusals.Write(key, rec)
	if err != nil {
		s.log.Error("audit write failed for a refused request", "err", err)
	} else if written {
		s.metrics.auditWritten()
	}
}

// startRefusalFlusher writes the aggregate refusal records once a second
// until the returned stop is called; stop writes the rest and returns once
// they are written, so they precede the audit log's stop record.
func (s *Server) startRefusalFlusher() (stop func()) {
	if s.refusals == nil {
		return func() {}
	}
	done, finished := make(chan struct{}), make(chan struct{})
	flush := func(all bool) {
		if err := s.refusals.Flush(all, newExecID); err != nil {
			s.log.Error("audit write failed for aggregated refusals", "err", err)
		}
	}
	go func() {
		defer close(finished)
		t := time.NewTicker(refusalInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				flush(false)
			case <-done:
				flush(true)
				return
			}
		}
	}()
	return func() { close(done); <-finished }
}

// connRefused audits a connection refused at accept.
func (s *Server) connRefused(c launch.Caller, reason, msg string) {
	// Method and path are empty: no request was read.
	s.auditRefusal(s.record(newExecID(), audit.StepAccept, c, limitExceeded(msg), &facts.Accept{ConnectionRefused: reason}))
}
