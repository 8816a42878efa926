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
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/launch"
	"github.com/sandboxd/sandboxd/policy"
	"github.com/sandboxd/sandboxd/session"
)

// newExecID returns 128 random bits in hex: unguessable, so one caller cannot
// predict another's id, and within the launch spec's [A-Za-z0-9_-]{1,64}.
func newExecID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error; it crashes instead.
	return hex.EncodeToString(b[:])
}

// handleExec serves POST /v1/exec.
func (s *Server) handleExec(w http.ResponseWriter, r *http.Request) {
	s.serveExec(w, r, nil)
}

// execCall is one exec request on its way through serveExec's phases.
type execCall struct {
	w      http.ResponseWriter
	r      *http.Request
	sess   *session.Session // nil for a one-shot exec
	id     string
	caller launch.Caller
	log    *slog.Logger
}

// serveExec runs the accept and decide steps, launches, and answers. It is
// shared with session execs (sess != nil: the session timeout cap applies,
// the exec runs in the session's workspace, one at a time per session, and a
// delete of the session kills it).
func (s *Server) serveExec(w http.ResponseWriter, r *http.Request, sess *session.Session) {
	caller, _ := callerFrom(r.Context()) // the auth middleware has refused requests without one
	c := &execCall{w: w, r: r, sess: sess, id: execIDFor(r.Context()), caller: caller}
	w.Header().Set(api.ExecIDHeader, c.id)
	c.log = s.log.With("exec_id", c.id, "caller", caller.ID(), "caller_uid", caller.UID, "caller_pid", caller.PID)
	req, ok := s.acceptExec(c)
	if !ok {
		return
	}
	d, launchCtx, done, ok := s.decideAndAdmit(c, req)
	defer done()
	if !ok {
		return
	}
	s.metrics.addInFlight(1)
	defer s.metrics.addInFlight(-1)
	s.launchAndAnswer(launchCtx, c, d)
}

// acceptExec is the accept step: the body is read and decoded strictly,
// and the accept record written before anything else is done with it.
func (s *Server) acceptExec(c *execCall) (api.ExecRequest, bool) {
	body, apiE := readBody(c.w, c.r, s.cfg.MaxBodyBytes)
	var req api.ExecRequest
	if apiE == nil {
		apiE = decodeStrict(body, &req)
	}
	bodyBytes, contentLength := len(body), c.r.ContentLength
	accept := s.record(c.id, audit.StepAccept, c.caller, apiE, &facts.Accept{
		Method: c.r.Method, Path: c.r.URL.Path, BodyBytes: &bodyBytes, ContentLength: &contentLength,
	})
	if err := s.writeAudit(accept); err != nil {
		s.auditFailed(c.w, c.log, err)
		return req, false
	}
	if apiE != nil {
		s.refuse(c.w, c.log, audit.StepAccept, apiE)
		return req, false
	}
	return req, true
}

// decideAndAdmit is the decide step: policy, the session's turn, then a
// slot, and the decide record. done releases what it took (the slot, the
// session's turn); it is never nil.
func (s *Server) decideAndAdmit(c *execCall, req api.ExecRequest) (decision, context.Context, func(), bool) {
	var d decision
	var apiE *APIError
	req.Network, apiE = sessionNetwork(c.sess, req.Network)
	if apiE == nil {
		d, apiE = s.decideExec(req, c.caller, c.id, c.sess)
	}
	if apiE == nil {
		apiE = foreignKernelRefusal(c.sess, c.caller, d.mode)
	}
	launchCtx, endExec, release := c.r.Context(), func() {}, func() {}
	if apiE == nil && c.sess != nil {
		var end func()
		launchCtx, end, apiE = s.beginSessionExec(c.r.Context(), c.sess, &d)
		if end != nil {
			endExec = end
		}
	}
	if apiE == nil {
		release, apiE = s.admit(c, &d)
	}
	done := func() { release(); endExec() }
	var df any // a refusal before policy decided has no facts yet
	if d.facts != nil {
		df = d.facts
	}
	if err := s.writeAudit(s.record(c.id, audit.StepDecide, c.caller, apiE, df)); err != nil {
		s.auditFailed(c.w, c.log, err)
		return d, nil, done, false
	}
	if apiE != nil {
		s.refuse(c.w, c.log, audit.StepDecide, apiE)
		return d, nil, done, false
	}
	return d, launchCtx, done, true
}

// decision is a request that policy accepted, as the launch it becomes,
// with the facts the decide record carries.
type decision struct {
	launch     launch.Request
	mode       string // kernel or process
	entrypoint string
	inputs     json.RawMessage
	facts      *facts.Decide
}

// decideExec runs the decide step (policy.Decide, pure) and turns its
// Decision into the LaunchRequest the supervisor carries out.
func (s *Server) decideExec(req api.ExecRequest, caller launch.Caller, execID string, sess *session.Session) (decision, *APIError) {
	preq := policy.Request{Exec: req, Session: sess != nil}
	if sess != nil {
		preq.SessionEnvironment = s.sessions.EnvironmentOf(sess)
	}
	d, err := policy.Decide(preq, caller, s.liveConfig())
	if err != nil {
		return decision{facts: d.Facts}, toAPI(err)
	}
	if apiE := s.environmentRefusal(d.Environment.Name); apiE != nil {
		return decision{facts: d.Facts}, apiE
	}
	mode := d.Mode
	if _, ok := s.kernelHost(); !ok && mode == api.ModeKernel && req.Mode == "" {
		mode = api.ModeProcess // the session default, where kernels cannot run
	}
	return decision{
		launch: launch.Request{
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

// beginSessionExec marks the session in use and waits, up to the exec's
// own timeout, for the session's previous exec to end.
func (s *Server) beginSessionExec(ctx context.Context, sess *session.Session, d *decision) (context.Context, func(), *APIError) {
	d.launch.SessionWorkspace = sess.WorkspaceName()
	d.facts.SessionID = sess.ID
	endUse, err := s.sessions.Use(sess)
	if err != nil {
		return nil, nil, toAPI(err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, d.launch.Limits.Timeout())
	execCtx, endExec, err := s.sessions.BeginExec(waitCtx, ctx, sess)
	cancel()
	if err != nil {
		endUse()
		if errors.Is(err, session.ErrDeleting) {
			return nil, nil, toAPI(err)
		}
		return nil, nil, apiErr(api.CodeConflict, fmt.Sprintf("the session's previous exec was still running after this exec's timeout of %d ms; execs in a session run one at a time", d.launch.Limits.TimeoutMS))
	}
	return execCtx, func() { endExec(); endUse() }, nil
}

// admit waits for an exec slot (fairly, see package admission) up to the
// exec's own timeout; a full queue answers at once.
func (s *Server) admit(c *execCall, d *decision) (func(), *APIError) {
	ctx := c.r.Context()
	waitCtx, cancel := context.WithTimeout(ctx, d.launch.Limits.Timeout())
	rel, err := s.gate.Acquire(waitCtx, c.caller.ID())
	cancel()
	switch {
	case err == nil:
		d.facts.Admission = "admitted"
		return rel, nil
	case errors.Is(err, admission.ErrShareFull), errors.Is(err, admission.ErrQueueFull):
		return func() {}, s.queueRefusal(c.caller, err)
	case ctx.Err() != nil:
		return func() {}, apiErr(api.CodeInvalidArgument, "the client went away while the exec waited for a slot")
	}
	return func() {}, limitExceeded(fmt.Sprintf("no exec slot freed within the exec's timeout of %d ms (%d running at most); retry later", d.launch.Limits.TimeoutMS, s.gate.Max()))
}

func limitExceeded(msg string) *APIError {
	return toAPI(errdefs.New(errdefs.ErrResourceExhausted, msg, "", nil))
}

// launchAndAnswer runs a decided exec (with its egress relay, if any) and
// answers, buffered or streamed.
func (s *Server) launchAndAnswer(ctx context.Context, c *execCall, d decision) {
	c.log.Info("launch", "runtime", d.launch.Runtime, "mode", d.mode, "network", d.launch.Network, "timeout_ms", d.launch.Limits.TimeoutMS)
	var eg *egressRun
	// A kernel exec uses its kernel's proxy (kernel.Host.StartSession), which
	// records it under this exec's id; any other egress exec gets its own.
	if d.launch.Network == api.NetworkEgress && !(d.mode == api.ModeKernel && c.sess != nil) {
		var err error
		if eg, err = s.startEgress(ctx, c.id, c.caller, c.log); err != nil {
			s.launchFailed(ctx, c.w, c.log, c.id, err)
			return
		}
		d.launch.Egress = c.id
	}
	egressLaunchEnv(&d.launch)
	var st *streamer
	if wantsStream(c.r) {
		st = newStreamer(c.w)
	}
	res, err := s.dispatch(ctx, c.sess, d, st)
	if eg != nil {
		if network := eg.finish(); res != nil {
			res.Network = network
		}
	}
	if err == nil && d.runsPlain() {
		deriveException(d.launch.Runtime, res)
	}
	s.answer(ctx, c, d, res, err, st)
}

// dispatch runs a decided exec: in the session's kernel, in a throwaway
// kernel (a one-shot kernel exec), through the runner's run-once mode (a
// process-mode code-node call), or as a plain
// process (every other process-mode exec; its exception is derived from
// its stderr afterwards). With a streamer, output and displays are
// streamed as they happen.
func (s *Server) dispatch(ctx context.Context, sess *session.Session, d decision, st *streamer) (*launch.ExecResult, error) {
	var emit func(event) bool
	if st != nil {
		emit = st.emit
	}
	switch {
	case d.mode == api.ModeKernel && sess != nil:
		return s.runKernelExec(ctx, sess, d, emit)
	case d.mode == api.ModeKernel, s.useRunner(d):
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
	if res, ok, err := s.runWarm(ctx, sess, d); ok {
		return res, err
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

// answer writes a launched exec's result, or its failure.
func (s *Server) answer(ctx context.Context, c *execCall, d decision, res *launch.ExecResult, err error, st *streamer) {
	if err != nil {
		if st != nil && st.hasStarted() {
			st.emit(event{Type: "error", Error: toAPI(err)})
			return
		}
		s.launchFailed(ctx, c.w, c.log, c.id, err)
		return
	}
	if res == nil {
		c.log.Error("launcher returned neither a result nor an error")
		s.metrics.exec(OutcomeError)
		writeError(c.w, apiErr(api.CodeInternal, fmt.Sprintf("internal error in exec %s; see the supervisor log", c.id)))
		return
	}
	s.answerResult(c.w, c.log, c.id, d.launch.Limits, res, st)
}

// runsPlain reports whether the exec ran as a plain interpreter, whose
// exception (if any) only its stderr tells: neither in a kernel nor a
// code-node call through the runner.
func (d decision) runsPlain() bool {
	return d.entrypoint == "" && d.mode != api.ModeKernel
}

func (s *Server) answerResult(w http.ResponseWriter, log *slog.Logger, execID string, limits policy.Limits, res *launch.ExecResult, st *streamer) {
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
		out.Artifacts = []launch.Artifact{}
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

func resultOutcome(r *launch.ExecResult) string {
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
	s.auditBarrier(log)
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
	s.auditBarrier(log)
	log.Info("exec refused", "step", step, "code", e.Code, "reason", e.Message)
	s.metrics.exec(OutcomeRefused)
	s.metrics.refuse(e.Code)
	writeError(w, e)
}

// auditBarrier makes the exec's records so far durable before an answer
// that no synced record precedes (audit.Deferred: accept and decide wait
// for a barrier).
func (s *Server) auditBarrier(log *slog.Logger) {
	if err := audit.Sync(s.sink); err != nil {
		log.Error("audit barrier before the answer failed", "err", err)
	}
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

func (s *Server) record(execID, step string, c launch.Caller, refusal *APIError, f any) audit.Record {
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
		f = withCode(step, f, string(refusal.Code))
	}
	if f != nil {
		rec.Facts = f
	}
	return rec
}

// withCode adds a refusal's API error code to a record's facts f (a new
// value of the step's type when f is nil). Every step a request can be
// refused at has a code fact (facts.Coded); a step without one keeps the
// code in the record's error message only.
func withCode(step string, f any, code string) any {
	if f == nil {
		if typed := facts.New(step); typed != nil {
			f = typed
		}
	}
	if c, ok := f.(facts.Coded); ok {
		c.SetCode(code)
	}
	return f
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
