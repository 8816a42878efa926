package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/kernel/runners"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
)

// newKernelID is a kernel's launch id: its audit records' exec id.
func newKernelID() string { return "k-" + newExecID() }

// kernelLaunch is the long-lived launch of a session's kernel, from the
// exec that starts it: its caller, limits (no timeout: each exec has its
// own), env and the session's workspace; no files (each exec stages its
// own) and no artifacts (collected per exec).
func kernelLaunch(base LaunchRequest) (LaunchRequest, error) {
	req, err := runnerRequest(base, newKernelID(), runners.ModeKernel)
	if err != nil {
		return req, err
	}
	req.Files, req.Artifacts, req.Kernel = nil, nil, "session"
	req.Limits.TimeoutMS = 0
	return req, nil
}

// kernelFor returns the session's kernel of the exec's language, starting
// one if there is none or the last one ended. restarted says that an
// earlier kernel of this language had run in the session (it timed out,
// was OOM-killed, crashed, or died with an earlier supervisor).
func (s *Server) kernelFor(sess *Session, rl runnerLauncher, base LaunchRequest) (*kernel, bool, error) {
	k, ran := s.sessions.kernel(sess, base.Runtime)
	if k != nil && k.alive() {
		k.mu.Lock()
		restarted := k.restarted && !k.reported
		k.reported = true
		k.mu.Unlock()
		return k, restarted, nil
	}
	if k != nil {
		go k.sb.Stop() // broken: reap it
	}
	req, err := kernelLaunch(base)
	if err != nil {
		return nil, false, err
	}
	k, err = s.startSessionKernel(rl, req)
	if err != nil {
		s.sessions.setKernel(sess, base.Runtime, nil)
		return nil, false, err
	}
	k.restarted, k.reported = ran, true
	s.sessions.setKernel(sess, base.Runtime, k)
	return k, ran, nil
}

// runKernelExec runs a session exec in the session's kernel of its
// language: accept and decide are written; this writes kernel_exec (the
// link to the kernel's launch id), reap and artifacts.
func (s *Server) runKernelExec(ctx context.Context, sess *Session, d decision, emit func(event) bool) (*ExecResult, error) {
	rl, ok := s.runners()
	if !ok {
		return nil, kernelModeUnavailable()
	}
	if err := s.kernelEnvironmentConflict(sess, d.launch); err != nil {
		return nil, err
	}
	if len(d.launch.Files) > 0 {
		if err := rl.Stage(d.launch); err != nil {
			return nil, err
		}
	}
	k, restarted, err := s.kernelFor(sess, rl, d.launch)
	if err != nil {
		return nil, err
	}
	if err := s.kernelExecRecord(d, d.launch.Caller, k, restarted); err != nil {
		return nil, err
	}
	sink := newSink(d.launch.ExecID, d.launch.Limits.OutputLimitBytes, rl.ArtifactLimits(), emit)
	network := s.beginKernelExec(ctx, k.egress, d.launch.ExecID, d.launch.Caller)
	o := k.execute(ctx, d.execute(), d.launch.Limits.Timeout(), sink)
	if o.exit == nil && k.sb.OOMKilled() {
		// node's evaluator was killed and reported as 128+9: the kernel
		// is not trusted after an OOM kill.
		ex := k.sb.Stop()
		o.exit = &ex
	}
	if o.exit == nil {
		o.exit = stopIfOverQuota(k)
	}
	res := assemble(d, sink, o)
	res.Policy.Environment = s.environmentRef(k.environment)
	res.Network = network()
	res.OOMKilled = res.OOMKilled || k.sb.OOMKilled()
	k.mu.Lock()
	res.Kernel = &api.KernelInfo{ID: k.id, ExecutionCount: k.count, Restarted: restarted}
	k.mu.Unlock()
	if !k.alive() {
		s.sessions.setKernel(sess, k.language, nil)
		go k.sb.Stop()
	}
	s.kernelReapRecord(d, d.launch.Caller, k, res, o)
	rl.CollectArtifacts(d.launch, d.launch.SessionWorkspace, res)
	return res, nil
}

// stopIfOverQuota measures the session's workspace after a kernel exec that
// left the kernel running. Past the quota (or unmeasurable), the kernel is
// stopped as the watcher would have stopped it, and the exit says why: an
// exec that wrote past the quota between two polls is not let off.
func stopIfOverQuota(k *kernel) *launch.SandboxExit {
	over, err := k.sb.OverQuota()
	if !over {
		return nil
	}
	ex := k.sb.Stop()
	ex.QuotaExceeded = true
	if err != nil && ex.QuotaErr == "" {
		ex.QuotaErr = err.Error()
	}
	return &ex
}

// handleKernelRestart serves POST /v1/sessions/{id}/kernels/{language}/restart:
// the running kernel (if any) is stopped and a new one started, between
// two execs of the session.
func (s *Server) handleKernelRestart(w http.ResponseWriter, r *http.Request, sess *Session) {
	lang := r.PathValue("language")
	if !policy.HasRunner(lang) {
		writeError(w, apiErr(api.CodeInvalidArgument, fmt.Sprintf("language %q has no kernel: want python or javascript", lang)))
		return
	}
	rl, ok := s.runners()
	if !ok {
		writeError(w, toAPI(kernelModeUnavailable()))
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
	if old, _ := s.sessions.kernel(sess, lang); old != nil {
		s.sessions.setKernel(sess, lang, nil)
		old.sb.Stop()
	}
	base := LaunchRequest{Caller: caller, Runtime: lang, Limits: s.cfg.Limits(s.liveConfig().ExecTimeoutMS),
		Env: map[string]string{}, Network: network, SessionWorkspace: sess.WorkspaceName(),
		Environment: s.sessionKernelEnvironment(sess, lang)}
	req, err := kernelLaunch(base)
	var k *kernel
	if err == nil {
		k, err = s.startSessionKernel(rl, req)
	}
	if err != nil {
		writeError(w, toAPI(err))
		return
	}
	k.restarted, k.reported = true, true
	s.sessions.setKernel(sess, lang, k)
	writeJSON(w, http.StatusOK, k.info())
}
