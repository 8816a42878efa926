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
	"github.com/sandboxd/sandboxd/nsinit/config"
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

// startEgress makes dir/<execID>/proxy.sock (0700/0600: the sandbox's uid
// maps to this one) and serves the exec's proxy on it until finish. The
// token handed to the helper is the exec id: a path component, never a path.
func (s *Server) startEgress(ctx context.Context, execID string, caller Caller, log *slog.Logger) (*egressRun, error) {
	if s.egress == nil {
		return nil, errdefs.New(errdefs.ErrUnavailable, "network \"egress\" was allowed by policy, but this supervisor runs no egress proxy", "restart sandboxd with --egress-allow", nil)
	}
	dir := filepath.Join(s.egress.dir, execID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, errdefs.New(errdefs.ErrUnavailable, "cannot create the exec's egress socket directory", "check "+s.egress.dir+" (owned by the service user, mode 0700)", err)
	}
	l, err := net.Listen("unix", filepath.Join(dir, config.EgressSocket))
	if err != nil {
		os.RemoveAll(dir)
		return nil, errdefs.New(errdefs.ErrUnavailable, "cannot listen on the exec's egress socket", "", err)
	}
	report := func(r egress.Record) {
		if err := s.writeAudit(egressRecord(execID, caller, r)); err != nil {
			log.Error("egress audit record", "err", err)
		}
	}
	run := &egressRun{exec: s.egress.proxy.NewExec(execID, report), dir: dir, done: make(chan struct{})}
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
	out := &api.NetworkResult{Mode: api.NetworkEgress, Connections: []api.Connection{}, Dropped: r.exec.Dropped()}
	for _, rec := range r.exec.Records() {
		out.Connections = append(out.Connections, api.Connection{
			Host: rec.Host, Port: rec.Port, Allowed: rec.Allowed, Reason: rec.Reason,
			BytesOut: rec.BytesOut, BytesIn: rec.BytesIn,
		})
	}
	return out
}

// egressRecord is the audit record of one connection attempt.
func egressRecord(execID string, c Caller, r egress.Record) audit.Record {
	rec := audit.Record{
		Time: time.Now().UTC(), ExecID: execID, Step: audit.StepEgress, Source: "supervisor",
		CallerUID: c.UID, CallerGID: c.GID, CallerPID: c.PID, OK: r.Allowed,
		Facts: &facts.Egress{
			Method: r.Method, Host: r.Host, Port: r.Port, Address: r.Address, Allowed: r.Allowed,
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
func sessionNetwork(sess *Session, asked string) (string, *APIError) {
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
