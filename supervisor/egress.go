package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/kernel"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/session"
)

// egressHost is the supervisor's side of network "egress": the proxy and
// the directory (the helper config's egress_dir) that holds one socket
// directory per egress exec.
type egressHost struct {
	proxy *egress.Proxy
	dir   string
}

// SetEgress enables network "egress": p serves every egress exec, each on
// a socket in its own directory below dir (which must be the helper
// config's egress_dir; the helper binds only from there).
func (s *Server) SetEgress(p *egress.Proxy, dir string) {
	s.egress = &egressHost{proxy: p, dir: dir}
}

// egressRun is one exec's proxy: its socket directory and listener.
type egressRun struct {
	exec   *egress.Exec
	dir    string
	cancel context.CancelFunc
	done   chan struct{}
}

// egressSocket makes dir/<id>/proxy.sock (0700/0600: the sandbox's uid
// maps to this one) and listens on it. The token handed to the helper is
// id (an exec's or a kernel's launch id): a path component, never a path.
func (s *Server) egressSocket(id string) (string, net.Listener, error) {
	if s.egress == nil {
		return "", nil, errdefs.New(errdefs.ErrUnavailable, "network \"egress\" was allowed by policy, but this supervisor runs no egress proxy", "restart sandboxd with --egress-allow", nil)
	}
	dir := filepath.Join(s.egress.dir, id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", nil, errdefs.New(errdefs.ErrUnavailable, "cannot create the egress socket directory of "+id, "check "+s.egress.dir+" (owned by the service user, mode 0700)", err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, config.EgressSocket))
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, errdefs.New(errdefs.ErrUnavailable, "cannot listen on the egress socket of "+id, "", err)
	}
	return dir, l, nil
}

// egressReport is the audit sink of one exec's (or kernel's) connection
// records.
func (s *Server) egressReport(execID string, caller launch.Caller, log *slog.Logger) func(egress.Record) {
	return func(r egress.Record) {
		if err := s.writeAudit(egressRecord(execID, caller, r)); err != nil {
			log.Error("egress audit record", "err", err)
		}
	}
}

// startEgress serves a process exec's proxy on its own socket until
// finish.
func (s *Server) startEgress(ctx context.Context, execID string, caller launch.Caller, log *slog.Logger) (*egressRun, error) {
	dir, l, err := s.egressSocket(execID)
	if err != nil {
		return nil, err
	}
	run := &egressRun{exec: s.egressProxyFor(ctx).NewExec(execID, s.egressReport(execID, caller, log)), dir: dir, done: make(chan struct{})}
	// ctx is the exec's: its timeout and its cancellation end the proxy.
	pctx, cancel := context.WithCancel(ctx)
	run.cancel = cancel
	go func() {
		defer close(run.done)
		if err := run.exec.Serve(pctx, l); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Error("egress proxy", "err", err)
		}
	}()
	return run, nil
}

// finish closes the exec's proxy (every connection still open is cut and
// recorded), removes its socket directory and returns the result's
// network object.
func (r *egressRun) finish() *api.NetworkResult {
	r.cancel()
	<-r.done
	os.RemoveAll(r.dir)
	return networkResult(r.exec)
}

// networkResult is the result's network object of an exec's finished
// connection records.
func networkResult(e *egress.Exec) *api.NetworkResult {
	out := &api.NetworkResult{Mode: api.NetworkEgress, Connections: []api.Connection{}, Dropped: e.Dropped()}
	for _, rec := range e.Records() {
		out.Connections = append(out.Connections, api.Connection{
			Host: rec.Host, Port: rec.Port, Allowed: rec.Allowed, Reason: rec.Reason,
			BytesOut: rec.BytesOut, BytesIn: rec.BytesIn,
		})
	}
	return out
}

// egressLaunchEnv adds to a javascript egress launch the NODE_OPTIONS
// import that sends Node's built-in fetch through the relay (Node before 24
// ignores the proxy variables; egress.NodeOptionsImport). The request's
// own NODE_OPTIONS is kept, the import appended. Any other launch is
// unchanged: a "none" exec never gets it.
func egressLaunchEnv(req *launch.Request) {
	if req.Network != api.NetworkEgress || req.Runtime != "javascript" {
		return
	}
	env := make(map[string]string, len(req.Env)+1)
	for k, v := range req.Env {
		env[k] = v
	}
	env["NODE_OPTIONS"] = egress.WithNodeOptionsImport(env["NODE_OPTIONS"])
	req.Env = env
}

// kernelEgress is the kernel host's Egress hook: it serves the proxy of a
// session kernel's launch req (network "egress"), one socket bound into
// that kernel's sandbox alone (its directory named by the kernel's launch
// id), and points req at it.
func (s *Server) kernelEgress(req *launch.Request) (kernel.Proxy, error) {
	ke, err := s.startKernelEgress(req.ExecID, req.Caller)
	if err != nil {
		return nil, err
	}
	req.Egress = req.ExecID
	egressLaunchEnv(req)
	return ke, nil
}

// kernelProxy is a session kernel's proxy: served for the kernel's whole
// life, with records and limits per exec (egress.Kernel).
type kernelProxy struct {
	s      *Server
	k      *egress.Kernel
	dir    string
	cancel context.CancelFunc
	done   chan struct{}
}

// startKernelEgress serves the proxy of the kernel whose launch id is
// kernelID, until Stop. Connections made outside an exec are audited under
// the kernel's launch id and its caller (the one whose exec started it).
func (s *Server) startKernelEgress(kernelID string, caller launch.Caller) (*kernelProxy, error) {
	log := s.log.With("kernel_id", kernelID)
	dir, l, err := s.egressSocket(kernelID)
	if err != nil {
		return nil, err
	}
	ke := &kernelProxy{s: s, k: s.egress.proxy.NewKernel(kernelID, s.egressReport(kernelID, caller, log)), dir: dir, done: make(chan struct{})}
	// Not a request's context: the kernel outlives the exec that started
	// it. Stop ends it, when the kernel's sandbox has ended.
	ctx, cancel := context.WithCancel(context.Background())
	ke.cancel = cancel
	go func() {
		defer close(ke.done)
		if err := ke.k.Serve(ctx, l); err != nil {
			log.Error("kernel egress proxy", "err", err)
		}
	}()
	return ke, nil
}

// Stop closes the kernel's proxy and every connection still open, and
// removes its socket directory.
func (ke *kernelProxy) Stop() {
	ke.cancel()
	<-ke.done
	os.RemoveAll(ke.dir)
}

// BeginExec attributes the kernel's connections to the exec until the
// returned end, which cuts the exec's open connections and returns its
// network object.
func (ke *kernelProxy) BeginExec(ctx context.Context, execID string, caller launch.Caller) func() *api.NetworkResult {
	e, end := ke.k.BeginExec(ctx, execID, ke.s.egressReport(execID, caller, ke.s.log.With("exec_id", execID)))
	return func() *api.NetworkResult {
		end()
		return networkResult(e)
	}
}

// egressRecord is the audit record of one connection attempt.
func egressRecord(execID string, c launch.Caller, r egress.Record) audit.Record {
	rec := audit.Record{
		Time: time.Now().UTC(), ExecID: execID, Step: audit.StepEgress, Source: "supervisor",
		CallerUID: c.UID, CallerGID: c.GID, CallerPID: c.PID, Caller: c.ID(), OK: r.Allowed,
		Facts: &facts.Egress{
			Method: r.Method, Host: r.Host, Port: r.Port, Address: r.Address, AllowNet: r.AllowNet, Allowed: r.Allowed,
			Reason: r.Reason, BytesOut: r.BytesOut, BytesIn: r.BytesIn, DurationMS: r.Duration.Milliseconds(),
		},
	}
	if !r.Allowed {
		rec.Error = r.Reason
	}
	return rec
}

// sessionNetwork applies a session's network mode to one of its execs: an
// exec that names none gets the session's; one that names another is 400
// (the session's setting holds for its execs).
func sessionNetwork(sess *session.Session, asked string) (string, *APIError) {
	if sess == nil {
		return asked, nil
	}
	mode := sess.Network
	if mode == "" {
		mode = api.NetworkNone
	}
	if asked == "" || asked == mode {
		return mode, nil
	}
	return "", apiErr(api.CodeInvalidArgument, fmt.Sprintf("the session's network is %q; an exec in it cannot ask for %q", mode, asked))
}
