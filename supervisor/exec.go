package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/admission"
	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/policy"
)

// newExecID returns 128 random bits in hex: unguessable, so one caller cannot
// predict another's id, and within the launch spec's [A-Za-z0-9_-]{1,64}.
func newExecID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error; it crashes instead.
	return hex.EncodeToString(b[:])
}

// decision is a request that policy accepted, as the launch it becomes,
// with the facts the decide record carries.
type decision struct {
	launch     LaunchRequest
	mode       string // kernel or process
	entrypoint string
	inputs     json.RawMessage
	facts      map[string]any
}

// decideExec runs the decide step (policy.Decide, pure) and turns its
// Decision into the LaunchRequest the supervisor carries out.
func (s *Server) decideExec(req api.ExecRequest, caller Caller, execID string, sess *Session) (decision, *APIError) {
	preq := policy.Request{Exec: req, Session: sess != nil}
	if sess != nil {
		preq.SessionEnvironment = s.sessions.environmentOf(sess)
	}
	d, err := policy.Decide(preq, caller, s.liveConfig())
	if err != nil {
		return decision{facts: d.Facts}, toAPI(err)
	}
	if apiE := s.environmentRefusal(d.Environment.Name); apiE != nil {
		return decision{facts: d.Facts}, apiE
	}
	mode := d.Mode
	if _, ok := s.runners(); !ok && mode == api.ModeKernel && req.Mode == "" {
		mode = api.ModeProcess // the session default, where kernels cannot run
	}
	return decision{
		launch: LaunchRequest{
			ExecID:    execID,
			Caller:    caller,
			Runtime:   d.Runtime,
			Code:      d.Code,
			Stdin:     d.Stdin,
			Files:     d.Files,
			Env:       d.Env,
			Limits:    d.Limits,
			Artifacts: d.Artifacts,
			Network:   d.Network,

			Environment: d.Environment.Name,
		},
		mode: mode, entrypoint: d.Entrypoint, inputs: d.Inputs,
		facts: d.Facts,
	}, nil
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
	execID := execIDFor(ctx)
	w.Header().Set(api.ExecIDHeader, execID)
	log := s.log.With("exec_id", execID, "caller", caller.ID(), "caller_uid", caller.UID, "caller_pid", caller.PID)

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
	req.Network, apiE = sessionNetwork(sess, req.Network)
	var d decision
	if apiE == nil {
		d, apiE = s.decideExec(req, caller, execID, sess)
	}
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
		rel, err := s.gate.Acquire(waitCtx, caller.ID())
		cancel()
		switch {
		case err == nil:
			release = rel
			d.facts["admission"] = "admitted"
		case errors.Is(err, admission.ErrShareFull), errors.Is(err, admission.ErrQueueFull):
			apiE = s.queueRefusal(caller, err)
		case ctx.Err() != nil:
			apiE = apiErr(api.CodeInvalidArgument, "the client went away while the exec waited for a slot")
		default:
			apiE = limitExceeded(fmt.Sprintf("no exec slot freed within the exec's timeout of %d ms (%d running at most); retry later", d.launch.Limits.TimeoutMS, s.gate.Max()))
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
	log.Info("launch", "runtime", d.launch.Runtime, "mode", d.mode, "network", d.launch.Network, "timeout_ms", d.launch.Limits.TimeoutMS)
	var eg *egressRun
	// A kernel exec uses its kernel's proxy (startSessionKernel), which
	// records it under this exec's id; any other egress exec gets its own.
	if d.launch.Network == api.NetworkEgress && !(d.mode == api.ModeKernel && sess != nil) {
		var err error
		if eg, err = s.startEgress(launchCtx, execID, caller, log); err != nil {
			s.launchFailed(launchCtx, w, log, execID, err)
			return
		}
		d.launch.Egress = execID
	}
	egressLaunchEnv(&d.launch)
	var st *streamer
	if wantsStream(r) {
		st = newStreamer(w)
	}
	res, err := s.dispatch(launchCtx, sess, d, st)
	if eg != nil {
		network := eg.finish()
		if res != nil {
			res.Network = network
		}
	}
	if err != nil {
		if st != nil && st.hasStarted() {
			st.emit(event{Type: "error", Error: toAPI(err)})
			return
		}
		s.launchFailed(launchCtx, w, log, execID, err)
		return
	}
	if res == nil {
		log.Error("launcher returned neither a result nor an error")
		s.metrics.exec(OutcomeError)
		writeError(w, apiErr(api.CodeInternal, fmt.Sprintf("internal error in exec %s; see the supervisor log", execID)))
		return
	}
	s.answerResult(w, log, execID, d.launch.Limits, res, st)
}

// dispatch runs a decided exec: in the session's kernel, through the
// runner's run-once mode (process-mode python and javascript), or as a
// plain process (shell; javascript with stdin). With a streamer, output
// and displays are streamed as they happen.
func (s *Server) dispatch(ctx context.Context, sess *Session, d decision, st *streamer) (*ExecResult, error) {
	var emit func(event) bool
	if st != nil {
		emit = st.emit
	}
	switch {
	case d.mode == api.ModeKernel && sess != nil:
		return s.runKernelExec(ctx, sess, d, emit)
	case s.useRunner(d):
		return s.runOnce(ctx, d, emit)
	case d.entrypoint != "":
		return nil, errdefs.New(errdefs.ErrUnavailable, "this supervisor's launcher cannot run code-node calls (entrypoint)", "", nil)
	}
	if emit != nil {
		var cut streamCut
		d.launch.Output = func(name string, p []byte) {
			if data := cut.take(name, p, d.launch.Limits.OutputLimitBytes); data != "" {
				emit(event{Type: name, Data: data})
			}
		}
	}
	return s.launcher.Launch(ctx, d.launch)
}

// streamCut streams a process's output up to the output limit per stream.
type streamCut struct{ sent [2]int64 }

func (c *streamCut) take(name string, p []byte, limit int64) string {
	i := 0
	if name == "stderr" {
		i = 1
	}
	room := limit - c.sent[i]
	if room <= 0 {
		return ""
	}
	if int64(len(p)) > room {
		p = p[:room]
	}
	c.sent[i] += int64(len(p))
	return strings.ToValidUTF8(string(p), "\uFFFD")
}

// beginSessionExec marks the session in use and waits, up to the exec's
// own timeout, for the session's previous exec to end.
func (s *Server) beginSessionExec(ctx context.Context, sess *Session, d *decision) (context.Context, func(), *APIError) {
	d.launch.SessionWorkspace = sess.WorkspaceName()
	d.facts["session_id"] = sess.ID
	endUse, err := s.sessions.Use(sess)
	if err != nil {
		return nil, nil, toAPI(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, d.launch.Limits.Timeout())
	execCtx, endExec, err := s.sessions.BeginExec(waitCtx, ctx, sess)
	cancel()
	if err != nil {
		endUse()
		if errors.Is(err, ErrSessionDeleting) {
			return nil, nil, toAPI(err)
		}
		return nil, nil, apiErr(api.CodeConflict, fmt.Sprintf("the session's previous exec was still running after this exec's timeout of %d ms; execs in a session run one at a time", d.launch.Limits.TimeoutMS))
	}
	return execCtx, func() { endExec(); endUse() }, nil
}

func limitExceeded(msg string) *APIError {
	return toAPI(errdefs.New(errdefs.ErrResourceExhausted, msg, "", nil))
}

func (s *Server) answerResult(w http.ResponseWriter, log *slog.Logger, execID string, limits policy.Limits, res *ExecResult, st *streamer) {
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
	if out.Displays == nil {
		out.Displays = []api.Display{}
	}
	if out.Policy.Limits == (policy.Limits{}) {
		out.Policy.Limits = limits
	}
	outcome := resultOutcome(&out)
	s.metrics.exec(outcome)
	s.metrics.duration(float64(out.DurationMS) / 1000)
	log.Info("exec done", "outcome", outcome, "duration_ms", out.DurationMS)
	if st != nil {
		st.emit(event{Type: "result", Result: &out})
		return
	}
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

// launchFailed maps a launch that produced no result to an answer. The
// error's class decides it (toAPI), except that an internal error never
// shows its text: it may name host paths, and the log has it.
func (s *Server) launchFailed(ctx context.Context, w http.ResponseWriter, log *slog.Logger, execID string, err error) {
	if code := codeOf(err); code != api.CodeInternal {
		if code == api.CodeUnavailable {
			log.Warn("launch unavailable", "err", err)
			s.metrics.exec(OutcomeUnavailable)
		} else {
			log.Info("launch refused", "code", code, "err", err)
			s.metrics.exec(OutcomeRefused)
		}
		s.metrics.refuse(code)
		writeError(w, toAPI(err))
		return
	}
	if ctx.Err() != nil {
		if errors.Is(context.Cause(ctx), errShuttingDown) {
			log.Warn("exec stopped: the supervisor is shutting down", "err", err)
			s.metrics.exec(OutcomeUnavailable)
			writeError(w, toAPI(errdefs.New(errdefs.ErrUnavailable, "the supervisor is shutting down and stopped this exec", "retry once it is back", nil)))
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
	writeError(w, toAPI(errdefs.New(errdefs.ErrUnavailable, "the audit log cannot be written, so nothing is launched",
		"check the audit log's disk space and permissions (details in the supervisor log)", nil)))
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
		Caller:    c.ID(),
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
