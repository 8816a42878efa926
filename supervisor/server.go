package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sandboxd/sandboxd/admission"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/kernel"
	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// errShuttingDown is the cancellation cause of every request context once the
// shutdown grace period is over, so handlers can tell a shutdown from a
// client that went away.
var errShuttingDown = errors.New("supervisor shutting down")

const (
	// defaultShutdownGrace is how long in-flight requests may finish on
	// their own after a shutdown starts. Execs still running then are
	// cancelled, which makes the launcher kill them (I6).
	defaultShutdownGrace = 10 * time.Second
	// defaultKillGrace is how long cancelled handlers get to answer before
	// their connections are closed under them.
	defaultKillGrace   = 10 * time.Second
	healthProbeTimeout = 10 * time.Second
)

// Server is the API server of the supervisor.
type Server struct {
	cfg      policy.Config
	launcher launch.Launcher
	prober   launch.Prober
	sink     audit.Sink
	log      *slog.Logger
	version  string
	selfUID  int

	metrics  *metrics
	gate     *admission.Gate
	sessions *session.Store // nil: session routes answer 404
	egress   *egressHost    // nil: no egress proxy (SetEgress)
	limits   *callerLimits
	refusals *audit.RefusalLimiter // nil without a sink
	// frames bounds the kernel-channel frames all kernels hold at once.
	frames *protocol.Budget
	live   *liveSettings // admin overrides (settings.go)
	// auth authenticates requests on TCP listeners (SetAuth).
	auth          atomic.Pointer[Auth] // nil: no authentication (SetAuth never called)
	keys          keysStatus           // the keys file's loads, for health (LoadKeys)
	authFails     *authFailures
	authFailDelay time.Duration
	handler       http.Handler

	envMu sync.Mutex
	envs  *envChecker // nil until WatchEnvironments (environments.go)

	warm atomic.Pointer[launch.WarmPool] // nil: no warm pool (StartWarmPool, warmpool.go)

	shutdownGrace time.Duration
	killGrace     time.Duration

	// fronts are handlers that answer a TCP listener's requests instead
	// of the API (Mount); they reach the API through Handler.
	fronts map[net.Listener]http.Handler
}

// NewServer returns a server for cfg (which the caller has validated). sink
// receives the accept and decide records of every exec; a nil or failing
// sink makes every exec answer 503 rather than run unaudited. log may be nil.
func NewServer(cfg policy.Config, l launch.Launcher, p launch.Prober, sink audit.Sink, log *slog.Logger, version string) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:           cfg,
		launcher:      l,
		prober:        p,
		sink:          sink,
		log:           log,
		version:       version,
		selfUID:       os.Getuid(),
		metrics:       newMetrics(sink),
		gate:          admission.New(cfg.MaxConcurrentExecs, cfg.MaxQueuedExecs, cfg.QueueShare()),
		shutdownGrace: defaultShutdownGrace,
		killGrace:     defaultKillGrace,
		live:          newLiveSettings(cfg),
		frames:        protocol.NewBudget(kernel.DefaultFrameBudgetBytes, kernel.FrameBudgetWait),
		authFails:     newAuthFailures(authFailLimit, authFailWindow, authFailTable),
		authFailDelay: defaultAuthFailDelay,
	}
	s.limits = newCallerLimits(cfg.MaxConnections, cfg.MaxConnectionsPerCaller, cfg.CallerBodyBudget, log)
	s.limits.refused = s.connRefused
	if sink != nil {
		s.refusals = audit.NewRefusalLimiter(sink, refusalInterval, nil)
	}
	s.handler = s.routes()
	return s
}

// SetAuth sets how requests on TCP listeners are authenticated. Call it
// before Serve. Without it a TCP request is served as the anonymous caller,
// which cmd/sandboxd permits only with --allow-no-auth on loopback.
// It may be called again while serving (SIGHUP reloads the keys file):
// requests after the call use the new keys, so removing a line revokes
// that key without a restart.
func (s *Server) SetAuth(a Auth) { s.auth.Store(&a) }

// Handler returns the API as an http.Handler. Requests are authorised by
// what Serve's ConnContext attaches: a Unix-socket peer's credentials, or
// the mark of a TCP listener, whose requests are authenticated by API key;
// a request with neither (the handler served some other way) gets 403.
func (s *Server) Handler() http.Handler { return s.handler }

// frontKey marks the context of a request accepted on a mounted listener.
type frontKey struct{}

// Mount makes h answer every request accepted on ln (a TCP listener, passed
// to Serve with the others) instead of the API. The connections are the
// supervisor's own -- the same connection and caller limits, timeouts and
// shutdown as --listen -- and h reaches the API in-process through Handler,
// with the request's context, so every API call it makes is authenticated
// by API key exactly as a --listen request. A panic in h is answered 500
// for that request only, as in the API (I9). Call it before Serve.
func (s *Server) Mount(ln net.Listener, h http.Handler) {
	if s.fronts == nil {
		s.fronts = map[net.Listener]http.Handler{}
	}
	s.fronts[ln] = s.recoverPanics(h)
}

// serveFronts routes a mounted listener's requests to its handler.
func (s *Server) serveFronts(w http.ResponseWriter, r *http.Request) {
	if h, ok := r.Context().Value(frontKey{}).(http.Handler); ok {
		h.ServeHTTP(w, r)
		return
	}
	s.handler.ServeHTTP(w, r)
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	// A method-less pattern next to each method pattern catches the other
	// methods, so they get the JSON 405 rather than net/http's plain text.
	mux.HandleFunc("GET /v1/health", s.handleHealth)
	mux.Handle("/v1/health", methodNotAllowedHandler("GET, HEAD"))
	mux.HandleFunc("POST /v1/exec", s.handleExec)
	mux.Handle("/v1/exec", methodNotAllowedHandler("POST"))
	s.sessionRoutes(mux)
	s.settingsRoutes(mux)
	s.environmentRoutes(mux)
	mux.HandleFunc("GET /metrics", s.handleMetrics)
	mux.Handle("/metrics", methodNotAllowedHandler("GET, HEAD"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiErr(api.CodeNotFound, fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path)))
	})
	authed := s.authorize(s.limitBodies(cleanPath(mux)))
	return s.recoverPanics(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// GET /healthz answers everyone on every listener, before
		// authentication, for load balancers; it tells nothing but
		// liveness and the version.
		if r.URL.Path == "/healthz" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			s.handleHealthz(w, r)
			return
		}
		authed.ServeHTTP(w, r)
	}))
}

func methodNotAllowedHandler(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, methodNotAllowed(allow))
	})
}

// cleanPath answers 404 for a path that is not in clean form. ServeMux would
// redirect it instead, and a redirect is neither a route nor an error in the
// contract.
func cleanPath(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := r.URL.Path; p == "" || p[0] != '/' || path.Clean(p) != p {
			// A file path of a session that climbs out lexically ("..",
			// a second leading "/") is an escape: 403, as the contract
			// says; any other unclean file path is a bad argument.
			if _, rest, ok := strings.Cut(p, "/files/"); ok && strings.HasPrefix(p, "/v1/sessions/") {
				if rest == "" || rest[0] == '/' || rest == ".." || strings.HasPrefix(rest, "../") || strings.Contains(rest, "/../") || strings.HasSuffix(rest, "/..") {
					writeError(w, apiErr(api.CodeForbidden, fmt.Sprintf("file path %q escapes the session's workspace", rest)))
					return
				}
				writeError(w, apiErr(api.CodeInvalidArgument, fmt.Sprintf("file path %q is not in clean form", rest)))
				return
			}
			writeError(w, apiErr(api.CodeNotFound, fmt.Sprintf("no route for %s %q", r.Method, p)))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authorize refuses every request whose peer is not allowed, before routing,
// so a refused peer learns nothing about which paths exist.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := r.Context().Value(peerKey{}).(peer); ok && p.tcp {
			if r, ok = s.authenticateTCP(w, r, p); ok {
				next.ServeHTTP(w, r)
			}
			return
		}
		caller, err := callerFrom(r.Context())
		if err == nil && authorized(caller, s.selfUID, s.cfg.AllowUIDs, s.cfg.AllowGIDs) {
			next.ServeHTTP(w, r)
			return
		}
		msg := fmt.Sprintf("uid %d (gid %d) may not use this API; the operator can allow it with --allow-uid or --allow-gid", caller.UID, caller.GID)
		if err != nil {
			// -1, not the zero value: an audit line must never show an
			// unknown peer as uid 0.
			caller = launch.Caller{UID: -1, GID: -1, PID: -1}
			msg = "the peer's credentials could not be read; only local Unix-socket peers are served"
			s.log.Warn("request without peer credentials", "err", err, "method", r.Method, "path", r.URL.Path)
		}
		// Refusals are audited like any other request: an auditor wants to
		// see who knocked, not only who got in.
		execID := newExecID()
		rec := s.record(execID, audit.StepAccept, caller, apiErr(api.CodeForbidden, msg), &facts.Accept{Method: r.Method, Path: r.URL.Path})
		s.auditRefusal(rec)
		if r.Method == http.MethodPost && path.Base(r.URL.Path) == "exec" {
			s.metrics.exec(OutcomeRefused)
			s.metrics.refuse(api.CodeForbidden)
		}
		s.log.Info("request forbidden", "caller_uid", caller.UID, "caller_gid", caller.GID, "caller_pid", caller.PID,
			"method", r.Method, "path", r.URL.Path)
		writeError(w, apiErr(api.CodeForbidden, msg))
	})
}

// statusWriter remembers whether an answer has started, so a panic can be
// answered only when nothing was written yet.
type statusWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *statusWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// recoverPanics turns a panicking handler into a 500 for that request only;
// the server goes on serving everyone else (I9).
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler { //nolint:errorlint // v is a recovered panic value: net/http compares it the same way
				panic(v)
			}
			s.log.Error("handler panicked", "panic", fmt.Sprint(v), "method", r.Method, "path", r.URL.Path,
				"exec_id", sw.Header().Get(api.ExecIDHeader), "stack", string(debug.Stack()))
			if sw.wrote {
				// A partial answer must not look complete; abort the
				// connection instead.
				panic(http.ErrAbortHandler)
			}
			writeError(sw, apiErr(api.CodeInternal, "internal error; see the supervisor log"))
		}()
		next.ServeHTTP(sw, r)
	})
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), healthProbeTimeout)
	defer cancel()
	caller, _ := callerFrom(ctx) // the auth middleware has refused requests without one
	checks := s.prober.Probe(ctx, caller)
	checks.Archive = s.archiveHealth(ctx)
	ready := checks.Ready()
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
	}
	writeJSON(w, status, api.Health{OK: ready, Status: checks.Status(), Version: s.version, Checks: checks, Runtimes: policy.Runtimes(),
		Environments: s.environmentHealth(), Keys: s.keysHealth()})
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if err := s.metrics.write(w); err != nil {
		s.log.Debug("write metrics", "err", err)
	}
	s.limits.writeMetrics(w)
	s.live.writeMetrics(w)
	s.writeCallerRefusals(w)
	s.live.arch.writeMetrics(w, s.sessions)
	s.writeWarmMetrics(w)
}

// archiveHealth is the archive check: "" (off), "ok", or "degraded: ..."
// while the last operation of the store failed (the error is the
// store's, scrubbed of credentials).
func (s *Server) archiveHealth(ctx context.Context) string {
	if s.sessions == nil || s.sessions.Archives() == nil {
		return ""
	}
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	s.sessions.Archives().Recheck(pctx)
	cancel()
	if degraded, why, since := s.sessions.Archives().Health(); degraded {
		return fmt.Sprintf("degraded since %s: %s", since.UTC().Format(time.RFC3339), why)
	}
	return api.CheckOK
}

// Serve answers API requests on ln until ctx is cancelled, then shuts down
// gracefully: it stops accepting, lets in-flight requests finish for a grace
// period, then cancels the ones still running (the launcher kills their
// execs) and waits a little for their answers. It returns nil after a
// shutdown and an error when a listener fails. It closes ln and more: the
// Unix socket and the TCP listeners share one http.Server, so one shutdown
// covers them all.
func (s *Server) Serve(ctx context.Context, ln net.Listener, more ...net.Listener) error {
	lns := append([]net.Listener{ln}, more...)
	base, cancelBase := context.WithCancelCause(context.WithoutCancel(ctx))
	defer cancelBase(errShuttingDown)
	srv := &http.Server{
		Handler:     http.HandlerFunc(s.serveFronts),
		ConnContext: connContext,
		BaseContext: func(l net.Listener) context.Context {
			if h, ok := s.fronts[l]; ok {
				return context.WithValue(base, frontKey{}, h)
			}
			return base
		},
		// Bodies are read before any work starts, so a slow sender only
		// holds its own connection; these bound how long.
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		ConnState:         s.limits.connState,
	}
	defer s.startRefusalFlusher()()
	errc := make(chan error, len(lns))
	for _, l := range lns {
		go func() {
			if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve on %s: %w", l.Addr(), err)
				return
			}
			errc <- nil
		}()
		s.log.Info("serving", "addr", l.Addr().String(), "version", s.version)
	}

	select {
	case err := <-errc:
		_ = srv.Close()
		return err
	case <-ctx.Done():
	}

	s.log.Info("shutting down", "grace", s.shutdownGrace)
	graceCtx, cancelGrace := context.WithTimeout(context.Background(), s.shutdownGrace)
	err := srv.Shutdown(graceCtx)
	cancelGrace()
	if err != nil {
		s.log.Warn("requests still running after the grace period; cancelling them")
		cancelBase(errShuttingDown)
		killCtx, cancelKill := context.WithTimeout(context.Background(), s.killGrace)
		err = srv.Shutdown(killCtx)
		cancelKill()
		if err != nil {
			s.log.Error("requests still running after cancellation; closing their connections", "err", err)
			_ = srv.Close()
		}
	}
	var errs []error
	for range lns {
		errs = append(errs, <-errc)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.log.Info("stopped")
	return nil
}
