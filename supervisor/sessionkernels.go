package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/kernel"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// newKernelID is a kernel's launch id: its audit records' exec id.
func newKernelID() string { return "k-" + newExecID() }

// runKernelExec runs a session exec in the session's kernel of its
// language (package kernel runs it): accept and decide are written; the
// kernel host writes kernel_exec (the link to the kernel's launch id),
// reap and artifacts.
func (s *Server) runKernelExec(ctx context.Context, sess *session.Session, d decision, emit func(event) bool) (*launch.ExecResult, error) {
	host, ok := s.kernelHost()
	if !ok {
		return nil, kernel.ModeUnavailable()
	}
	if err := s.kernelEnvironmentConflict(sess, d.launch); err != nil {
		return nil, err
	}
	if len(d.launch.Files) > 0 {
		if err := host.Runners.Stage(d.launch); err != nil {
			return nil, err
		}
	}
	k, restarted, err := s.kernelFor(host, sess, d.launch)
	if err != nil {
		return nil, err
	}
	res, err := host.Run(ctx, k, restarted, d.kernelExec(emit))
	if err != nil {
		return nil, err
	}
	res.Policy.Environment = s.environmentRef(k.Environment())
	if !k.Alive() {
		s.sessions.SetKernel(sess, k.Language(), nil)
		go k.Stop()
	}
	return res, nil
}

// kernelFor returns the session's kernel of the exec's language, starting
// one if there is none or the last one ended. restarted says that an
// earlier kernel of this language had run in the session (it timed out,
// was OOM-killed, crashed, or died with an earlier supervisor).
func (s *Server) kernelFor(host *kernel.Host, sess *session.Session, base launch.Request) (*kernel.Kernel, bool, error) {
	held, ran := s.sessions.KernelOf(sess, base.Runtime)
	if k, ok := held.(*kernel.Kernel); ok && k.Alive() {
		return k, k.Claim(), nil
	}
	if held != nil {
		go held.Stop() // broken: reap it
	}
	req, err := kernel.SessionLaunch(base, newKernelID())
	if err != nil {
		return nil, false, err
	}
	k, err := host.StartSession(req, ran)
	if err != nil {
		s.sessions.SetKernel(sess, base.Runtime, nil)
		return nil, false, err
	}
	s.sessions.SetKernel(sess, base.Runtime, k)
	return k, ran, nil
}

// handleKernelRestart serves POST /v1/sessions/{id}/kernels/{language}/restart:
// the running kernel (if any) is stopped and a new one started, between
// two execs of the session.
func (s *Server) handleKernelRestart(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	lang := r.PathValue("language")
	if !policy.HasRunner(lang) {
		writeError(w, apiErr(api.CodeInvalidArgument, fmt.Sprintf("language %q has no kernel: want python or javascript", lang)))
		return
	}
	host, ok := s.kernelHost()
	if !ok {
		writeError(w, toAPI(kernel.ModeUnavailable()))
		return
	}
	caller, _ := callerFrom(r.Context())
	// The session's network holds for its kernels: a restarted kernel of
	// an egress session has egress, if this caller may have it (checked
	// before the running kernel is stopped).
	network, err := policy.DecideNetwork(sess.Network, caller, s.liveConfig())
	if err != nil {
		writeError(w, toAPI(err))
		return
	}
	endUse, err := s.sessions.Use(sess)
	if err != nil {
		writeError(w, toAPI(err))
		return
	}
	defer endUse()
	waitCtx, cancel := context.WithTimeout(r.Context(), time.Duration(s.cfg.ExecTimeoutCapMS)*time.Millisecond)
	_, endExec, err := s.sessions.BeginExec(waitCtx, r.Context(), sess)
	cancel()
	if err != nil {
		writeError(w, apiErr(api.CodeConflict, "the session's exec did not end in time; retry the restart"))
		return
	}
	defer endExec()
	if old, _ := s.sessions.KernelOf(sess, lang); old != nil {
		s.sessions.SetKernel(sess, lang, nil)
		old.Stop()
	}
	base := launch.Request{Caller: caller, Runtime: lang, Limits: s.cfg.Limits(s.liveConfig().ExecTimeoutMS),
		Env: map[string]string{}, Network: network, SessionWorkspace: sess.WorkspaceName(),
		Environment: s.sessionKernelEnvironment(sess, lang)}
	req, err := kernel.SessionLaunch(base, newKernelID())
	var k *kernel.Kernel
	if err == nil {
		k, err = host.StartSession(req, true)
	}
	if err != nil {
		writeError(w, toAPI(err))
		return
	}
	s.sessions.SetKernel(sess, lang, k)
	writeJSON(w, http.StatusOK, k.Info())
}
