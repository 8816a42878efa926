package supervisor

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/admission"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/policy"
)

// newExecID returns 128 random bits in hex: unguessable, so one caller cannot
// predict another's id, and within the launch spec's [A-Za-z0-9_-]{1,64}.
func newExecID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error; it crashes instead.
	return hex.EncodeToString(b[:])
}

// decision is a request that policy accepted, with the facts the decide
// record carries.
type decision struct {
	launch LaunchRequest
	facts  map[string]any
}

// decideExec is the decide step: it turns a decoded request into a
// LaunchRequest held to policy, or says why not. It reads no state beyond the
// config, so the same request always gets the same answer.
func (s *Server) decideExec(req api.ExecRequest, caller Caller, execID string, session bool) (decision, *APIError) {
	facts := map[string]any{"session": session}
	invalid := func(err error) (decision, *APIError) {
		return decision{facts: facts}, apiErr(api.CodeInvalidArgument, err.Error())
	}

	runtime, err := policy.Runtime(req.Language)
	if err != nil {
		return invalid(err)
	}
	facts["runtime"] = runtime

	facts["code_bytes"] = len(req.Code)
	if req.Code == "" {
		return invalid(errors.New("code is required and must not be empty"))
	}
	if int64(len(req.Code)) > s.cfg.MaxCodeBytes {
		return decision{facts: facts}, apiErr(api.CodeTooLarge, fmt.Sprintf("code is %d bytes; the limit is %d", len(req.Code), s.cfg.MaxCodeBytes))
	}
	if strings.IndexByte(req.Code, 0) >= 0 {
		// The runtime reads code from a file; a NUL would cut it short in
		// ways that differ between runtimes.
		return invalid(errors.New("code contains a NUL byte"))
	}
	sum := sha256.Sum256([]byte(req.Code))
	facts["code_sha256"] = hex.EncodeToString(sum[:])

	timeout, err := policy.ClampTimeout(req.TimeoutMS, session, s.cfg)
	if err != nil {
		return invalid(err)
	}

	files, fileBytes, apiE := s.decodeFiles(req.Files)
	facts["file_count"] = len(req.Files)
	if apiE != nil {
		return decision{facts: facts}, apiE
	}
	facts["file_bytes"] = fileBytes

	envNames := make([]string, 0, len(req.Env))
	for name := range req.Env {
		envNames = append(envNames, name)
	}
	sort.Strings(envNames)
	// Names only unless the operator asked for values (--audit-env-values):
	// values may be secrets and the audit log outlives them.
	facts["env_names"] = envNames
	facts["env_values_recorded"] = s.cfg.AuditEnvValues
	if s.cfg.AuditEnvValues {
		values := make(map[string]string, len(req.Env))
		for name, v := range req.Env {
			values[name] = v
		}
		facts["env"] = values
	}
	if err := policy.ValidateEnv(req.Env); err != nil {
		return invalid(err)
	}

	facts["artifacts"] = req.Artifacts
	if len(req.Artifacts) > policy.MaxArtifactPatterns {
		return invalid(fmt.Errorf("artifacts has %d patterns; at most %d are allowed", len(req.Artifacts), policy.MaxArtifactPatterns))
	}
	for i, p := range req.Artifacts {
		if err := policy.ValidateArtifactPattern(p); err != nil {
			return invalid(fmt.Errorf("artifacts[%d]: %w", i, err))
		}
	}

	network, err := policy.Network(req.Network)
	if err != nil {
		return invalid(err)
	}
	facts["network"] = network

	limits := s.cfg.Limits(timeout)
	facts["limits"] = limits
	facts["stdin_bytes"] = len(req.Stdin)

	env := req.Env
	if env == nil {
		env = map[string]string{}
	}
	return decision{
		launch: LaunchRequest{
			ExecID:    execID,
			Caller:    caller,
			Runtime:   runtime,
			Code:      req.Code,
			Stdin:     []byte(req.Stdin),
			Files:     files,
			Env:       env,
			Limits:    limits,
			Artifacts: req.Artifacts,
			Network:   network,
		},
		facts: facts,
	}, nil
}

// decodeFiles validates and decodes the staged files. Beyond each path being
// a clean workspace path, no path may appear twice or be both a file and a
// directory ("a" and "a/b"): either would make the staged workspace depend on
// the order the launcher writes files in.
func (s *Server) decodeFiles(in []api.ExecFile) ([]StagedFile, int64, *APIError) {
	if len(in) > policy.MaxFiles {
		return nil, 0, apiErr(api.CodeInvalidArgument, fmt.Sprintf("files has %d entries; at most %d are allowed", len(in), policy.MaxFiles))
	}
	out := make([]StagedFile, 0, len(in))
	seen := make(map[string]int, len(in))
	var total int64
	for i, f := range in {
		if err := policy.ValidateWorkspacePath(f.Path); err != nil {
			return nil, 0, apiErr(api.CodeInvalidArgument, fmt.Sprintf("files[%d].path: %v", i, err))
		}
		if j, dup := seen[f.Path]; dup {
			return nil, 0, apiErr(api.CodeInvalidArgument, fmt.Sprintf("files[%d].path %q is the same as files[%d].path", i, f.Path, j))
		}
		seen[f.Path] = i
		content, err := base64.StdEncoding.DecodeString(f.ContentBase64)
		if err != nil {
			return nil, 0, apiErr(api.CodeInvalidArgument, fmt.Sprintf("files[%d].content_base64: not valid standard base64: %v", i, err))
		}
		total += int64(len(content))
		if total > s.cfg.WorkspaceQuotaBytes {
			return nil, 0, apiErr(api.CodeTooLarge, fmt.Sprintf("files add up to more than the workspace quota of %d bytes", s.cfg.WorkspaceQuotaBytes))
		}
		out = append(out, StagedFile{Path: f.Path, Content: content})
	}
	for p, i := range seen {
		for dir := parentDir(p); dir != ""; dir = parentDir(dir) {
			if j, clash := seen[dir]; clash {
				return nil, 0, apiErr(api.CodeInvalidArgument, fmt.Sprintf("files[%d].path %q is a directory of files[%d].path %q; a path cannot be both", j, dir, i, p))
			}
		}
	}
	return out, total, nil
}

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

// handleExec serves POST /v1/exec.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	s.serveExec(w, r, nil)
}

// serveExec runs the accept and decide steps, launches, and answers. It is
// shared with session execs (sess != nil: the session timeout cap applies,
// the exec runs in the session's workspace, one at a time per session, and a
// delete of the session kills it).
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, sess *Session) {
	ctx := r.Context()
	caller, _ := callerFrom(ctx) // the auth middleware has refused requests without one
	execID := newExecID()
	w.Header().Set(api.ExecIDHeader, execID)
	log := s.log.With("exec_id", execID, "caller_uid", caller.UID, "caller_pid", caller.PID)

	// Accept: the body is read and decoded strictly.
	body, apiE := readBody(w, r, s.cfg.MaxBodyBytes)
	var req api.ExecRequest
	if apiE == nil {
		apiE = decodeStrict(body, &req)
	}
	accept := s.record(execID, audit.StepAccept, caller, apiE, map[string]any{
		"method":         r.Method,
		"path":           r.URL.Path,
		"body_bytes":     len(body),
		"content_length": r.ContentLength,
	})
	if err := s.writeAudit(accept); err != nil {
		s.auditFailed(w, log, err)
		return
	}
	if apiE != nil {
		s.refuse(w, log, audit.StepAccept, apiE)
		return
	}

	// Decide: policy, then a slot. An exec waits for a slot (fairly, see
	// package admission) up to its own timeout; a full queue answers at once.
	d, apiE := s.decideExec(req, caller, execID, sess != nil)
	release := func() {}
	launchCtx := ctx
	if apiE == nil && sess != nil {
		var endExec func()
		launchCtx, endExec, apiE = s.beginSessionExec(ctx, sess, &d)
		if endExec != nil {
			defer endExec()
		}
	}
	if apiE == nil {
		waitCtx, cancel := context.WithTimeout(ctx, d.launch.Limits.Timeout())
		rel, err := s.gate.Acquire(waitCtx, caller.UID)
		cancel()
		switch {
		case err == nil:
			release = rel
			d.facts["admission"] = "admitted"
		case errors.Is(err, admission.ErrQueueFull):
			apiE = limitExceeded(fmt.Sprintf("%d execs are running and %d waiting, the operator's maximum; retry later", s.cfg.MaxConcurrentExecs, s.cfg.MaxQueuedExecs))
		case ctx.Err() != nil:
			apiE = apiErr(api.CodeInvalidArgument, "the client went away while the exec waited for a slot")
		default:
			apiE = limitExceeded(fmt.Sprintf("no exec slot freed within the exec's timeout of %d ms (%d running at most); retry later", d.launch.Limits.TimeoutMS, s.cfg.MaxConcurrentExecs))
		}
	}
	defer release()
	if err := s.writeAudit(s.record(execID, audit.StepDecide, caller, apiE, d.facts)); err != nil {
		s.auditFailed(w, log, err)
		return
	}
	if apiE != nil {
		s.refuse(w, log, audit.StepDecide, apiE)
		return
	}

	s.metrics.addInFlight(1)
	defer s.metrics.addInFlight(-1)
	log.Info("launch", "runtime", d.launch.Runtime, "timeout_ms", d.launch.Limits.TimeoutMS)
	res, err := s.launcher.Launch(launchCtx, d.launch)
	if err != nil {
		s.launchFailed(launchCtx, w, log, execID, err)
		return
	}
	if res == nil {
		log.Error("launcher returned neither a result nor an error")
		s.metrics.exec(OutcomeError)
		writeError(w, apiErr(api.CodeInternal, fmt.Sprintf("internal error in exec %s; see the supervisor log", execID)))
		return
	}
	s.answerResult(w, log, execID, d.launch.Limits, res)
}

// beginSessionExec marks the session in use and waits, up to the exec's
// own timeout, for the session's previous exec to end.
func (s *Server) beginSessionExec(ctx context.Context, sess *Session, d *decision) (context.Context, func(), *APIError) {
	d.launch.SessionWorkspace = sess.WorkspaceName()
	d.facts["session_id"] = sess.ID
	endUse, err := s.sessions.Use(sess)
	if err != nil {
		return nil, nil, sessionError(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, d.launch.Limits.Timeout())
	execCtx, endExec, err := s.sessions.BeginExec(waitCtx, ctx, sess)
	cancel()
	if err != nil {
		endUse()
		if errors.Is(err, ErrSessionDeleting) {
			return nil, nil, sessionError(err)
		}
		return nil, nil, apiErr(api.CodeConflict, fmt.Sprintf("the session's previous exec was still running after this exec's timeout of %d ms; execs in a session run one at a time", d.launch.Limits.TimeoutMS))
	}
	return execCtx, func() { endExec(); endUse() }, nil
}

func limitExceeded(msg string) *APIError {
	return &APIError{Status: api.CodeLimitExceeded.Status(), Code: api.CodeLimitExceeded, Message: msg, RetryAfter: 1}
}

func (s *Server) answerResult(w http.ResponseWriter, log *slog.Logger, execID string, limits policy.Limits, res *ExecResult) {
	out := *res
	if out.ID != execID {
		if out.ID != "" {
			// The id is the audit id; one that differs would point an
			// auditor at the wrong records.
			log.Error("launcher returned a different exec id; answering with the audited one", "launcher_id", out.ID)
		}
		out.ID = execID
	}
	if out.Artifacts == nil {
		out.Artifacts = []Artifact{}
	}
	if out.Policy.Limits == (policy.Limits{}) {
		out.Policy.Limits = limits
	}
	outcome := resultOutcome(&out)
	s.metrics.exec(outcome)
	s.metrics.duration(float64(out.DurationMS) / 1000)
	log.Info("exec done", "outcome", outcome, "duration_ms", out.DurationMS)
	writeJSON(w, http.StatusOK, &out)
}

func resultOutcome(r *ExecResult) string {
	switch {
	case r.TimedOut:
		return OutcomeTimeout
	case r.Signal != nil:
		return OutcomeSignal
	case r.ExitCode != nil && *r.ExitCode == 0:
		return OutcomeOK
	default:
		return OutcomeError
	}
}

// launchFailed maps a launch that produced no result to an answer.
func (s *Server) launchFailed(ctx context.Context, w http.ResponseWriter, log *slog.Logger, execID string, err error) {
	if le, ok := AsLaunchError(err); ok {
		switch le.Kind {
		case KindUnavailable:
			msg := le.Reason
			if le.Fix != "" {
				msg += "; fix: " + le.Fix
			}
			log.Warn("launch unavailable", "err", err)
			s.metrics.exec(OutcomeUnavailable)
			s.metrics.refuse(api.CodeUnavailable)
			writeError(w, apiErr(api.CodeUnavailable, msg))
			return
		case KindInvalid:
			log.Info("launch refused by the helper", "err", err)
			s.metrics.exec(OutcomeRefused)
			s.metrics.refuse(api.CodeInvalidArgument)
			writeError(w, apiErr(api.CodeInvalidArgument, le.Reason))
			return
		case KindQuota, KindForbidden:
			code := api.CodeQuotaExceeded
			if le.Kind == KindForbidden {
				code = api.CodeForbidden
			}
			s.metrics.exec(OutcomeRefused)
			s.metrics.refuse(code)
			writeError(w, apiErr(code, le.Reason))
			return
		}
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errShuttingDown) {
			log.Warn("exec stopped: the supervisor is shutting down", "err", err)
			s.metrics.exec(OutcomeUnavailable)
			writeError(w, apiErr(api.CodeUnavailable, "the supervisor is shutting down and stopped this exec; fix: retry once it is back"))
			return
		}
		// The client went away; the launcher has killed the exec and
		// nobody is left to read an answer.
		log.Info("exec cancelled: the client disconnected", "err", err)
		s.metrics.exec(OutcomeError)
		return
	}
	log.Error("launch failed", "err", err)
	s.metrics.exec(OutcomeError)
	writeError(w, apiErr(api.CodeInternal, fmt.Sprintf("internal error in exec %s; see the supervisor log", execID)))
}

// refuse answers a request that policy or decoding turned down.
func (s *Server) refuse(w http.ResponseWriter, log *slog.Logger, step string, e *APIError) {
	log.Info("exec refused", "step", step, "code", e.Code, "reason", e.Message)
	s.metrics.exec(OutcomeRefused)
	s.metrics.refuse(e.Code)
	writeError(w, e)
}

// auditFailed answers a request whose audit record could not be written:
// nothing runs unaudited (I7), and the host, not the caller, is at fault.
func (s *Server) auditFailed(w http.ResponseWriter, log *slog.Logger, err error) {
	log.Error("audit write failed; refusing the exec", "err", err)
	s.metrics.exec(OutcomeUnavailable)
	s.metrics.refuse(api.CodeUnavailable)
	writeError(w, apiErr(api.CodeUnavailable, "the audit log cannot be written, so nothing is launched; fix: check the audit log's disk space and permissions (details in the supervisor log)"))
}

func (s *Server) record(execID, step string, c Caller, refusal *APIError, facts map[string]any) audit.Record {
	rec := audit.Record{
		Time:      time.Now().UTC(),
		ExecID:    execID,
		Step:      step,
		Source:    "supervisor",
		CallerUID: c.UID,
		CallerGID: c.GID,
		CallerPID: c.PID,
		OK:        refusal == nil,
	}
	if refusal != nil {
		rec.Error = refusal.Message
		if facts == nil {
			facts = map[string]any{}
		}
		facts["code"] = refusal.Code
	}
	if facts != nil {
		rec.Facts = facts
	}
	return rec
}

func (s *Server) writeAudit(rec audit.Record) error {
	if s.sink == nil {
		return errors.New("no audit sink configured")
	}
	if err := s.sink.Write(rec); err != nil {
		return fmt.Errorf("audit %s record of exec %s: %w", rec.Step, rec.ExecID, err)
	}
	s.metrics.auditWritten()
	return nil
}
