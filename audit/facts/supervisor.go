package facts

import "time"

// The supervisor steps. Their records are written by the supervisor
// itself; the fields are the facts it holds at that point.

// Accept is the facts of the accept step: a request arrived from this peer
// and was (or was not) decoded. A peer refused by the credential check gets
// method and path only.
type Accept struct {
	Method        string `json:"method" audit:"always" doc:"the HTTP request line's method"`
	Path          string `json:"path" audit:"always" doc:"the HTTP request line's path"`
	BodyBytes     *int   `json:"body_bytes,omitempty" doc:"bytes of body read (bounded by --max-body-bytes)"`
	ContentLength *int64 `json:"content_length,omitempty" doc:"the Content-Length header (-1 when chunked)"`
	Code          string `json:"code,omitzero" doc:"on refusal: the API error code (invalid_argument, too_large, forbidden …); error has the message"`
	Probe         bool   `json:"probe,omitzero" doc:"the record of a health probe (GET /v1/health ran a probe exec through the whole launch)"`

	// Front-door refusals (DESIGN.md I11: per-caller limits, refusal
	// records rate-limited per caller).
	BodyRead           *bool      `json:"body_read,omitempty" doc:"false: refused by a per-caller limit before its body was read"`
	ConnectionRefused  string     `json:"connection_refused,omitzero" doc:"refused at accept, before any request was read (method and path are empty): caller (the uid's connection share, or an unauthenticated TCP address's), global (the listener's --max-connections) or unauthenticated (a TCP listener's budget for connections not yet authenticated)"`
	RefusalsSuppressed int        `json:"refusals_suppressed,omitzero" doc:"refusals of this caller not recorded one by one since its previous refusal record (at most one a second per caller)"`
	Aggregate          bool       `json:"aggregate,omitzero" doc:"the record stands for refusals_suppressed refusals of the caller, not for one request (method and path are the last one's)"`
	Since              *time.Time `json:"since,omitempty" doc:"on an aggregate: the start of the second whose refusals it counts"`

	// TCP listeners: a request refused before its API key
	// named a caller.
	RemoteAddr string `json:"remote_addr,omitzero" doc:"a TCP request's remote IP address, on a refusal before its API key named a caller"`
	Auth       string `json:"auth,omitzero" doc:"why a TCP request was not authenticated: bad_key (missing, malformed or wrong key; 401) or rate_limited (too many failures from the address; 429). The presented key is never recorded"`
}

// Step implements Facts.
func (*Accept) Step() string { return StepAccept }

// SetCode implements Coded.
func (f *Accept) SetCode(code string) { f.Code = code }

// Sentences implements Facts.
func (*Accept) Sentences() []Sentence {
	return []Sentence{
		{Text: "The request {method} {path} ({body_bytes} bytes) was read and decoded strictly; the caller, from the socket's SO_PEERCRED, is {caller}."},
		{Text: "Refused with {code}."},
		{Text: "Content-Length {content_length}."},
		{Text: "A health probe's exec: {probe}."},
		{Text: "Its body was read: {body_read}."},
		{Text: "The connection was refused at accept ({connection_refused} limit)."},
		{Text: "{refusals_suppressed} refusals of this caller were not recorded one by one (aggregate record: {aggregate}, since {since})."},
		{Text: "The TCP request from {remote_addr} was not authenticated ({auth})."},
	}
}

// Limits are the limits decided for an exec (the fields of policy.Limits;
// a test in package audit keeps them equal).
type Limits struct {
	TimeoutMS        int64   `json:"timeout_ms"`
	OutputLimitBytes int64   `json:"output_limit_bytes"`
	TmpSizeBytes     int64   `json:"tmp_size_bytes"`
	MemoryBytes      int64   `json:"memory_bytes"`
	Pids             int64   `json:"pids"`
	CPUs             float64 `json:"cpus"`
	NoFile           uint64  `json:"nofile"`
	FileSizeBytes    uint64  `json:"file_size_bytes"`
}

// Decide is the facts of the decide step: what policy made of the request,
// before any resource is used. A refusal carries the facts gathered up to
// the rule that refused it.
type Decide struct {
	Session           bool              `json:"session,omitzero" doc:"a session exec (absent: not a session exec, or a health probe)"`
	SessionID         string            `json:"session_id,omitzero" doc:"which session"`
	Runtime           string            `json:"runtime,omitzero" audit:"required" doc:"the runtime the language maps to"`
	CodeBytes         *int              `json:"code_bytes,omitempty" doc:"size of the code as received (absent on a health probe)"`
	CodeSHA256        string            `json:"code_sha256,omitzero" doc:"SHA-256 of the code as received (absent on a health probe)"`
	FileCount         *int              `json:"file_count,omitempty" doc:"files to stage"`
	FileBytes         *int64            `json:"file_bytes,omitempty" doc:"decoded size of the files to stage"`
	EnvNames          []string          `json:"env_names,omitempty" doc:"names of the request's env, sorted"`
	EnvValuesRecorded *bool             `json:"env_values_recorded,omitempty" doc:"whether the values are recorded: only when the operator runs with --audit-env-values"`
	Env               map[string]string `json:"env,omitempty" doc:"the values, when recorded"`
	Artifacts         []string          `json:"artifacts,omitempty" doc:"the artifact patterns asked for"`
	Network           string            `json:"network,omitzero" doc:"the network mode (none or egress)"`
	Limits            *Limits           `json:"limits,omitempty" audit:"required" doc:"the limits decided"`
	StdinBytes        *int              `json:"stdin_bytes,omitempty" doc:"size of stdin"`
	Admission         string            `json:"admission,omitzero" doc:"admitted once an exec slot was granted"`
	Mode              string            `json:"mode,omitzero" doc:"kernel (the session's kernel of the language) or process (a fresh interpreter)"`
	Entrypoint        string            `json:"entrypoint,omitzero" doc:"the function called after the code with the inputs (a code-node call)"`
	InputsBytes       *int              `json:"inputs_bytes,omitempty" doc:"size of the inputs object, with an entrypoint"`
	Code              string            `json:"code,omitzero" doc:"on refusal: the API error code"`
	Probe             bool              `json:"probe,omitzero" doc:"the record of a health probe (GET /v1/health ran a probe exec through the whole launch)"`
	Environment       string            `json:"environment,omitzero" doc:"the environment the exec runs in: the request's, else the session's, else the language's default (helper config)"`
	EnvironmentDigest string            `json:"environment_digest,omitzero" doc:"that environment's digest (over its tree's registered content digest and its variables)"`
}

// Step implements Facts.
func (*Decide) Step() string { return StepDecide }

// SetCode implements Coded.
func (f *Decide) SetCode(code string) { f.Code = code }

// Sentences implements Facts.
func (*Decide) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "Policy accepted it."},
		{When: OnlyFailed, Text: "Policy refused it ({code})."},
		{Text: "Runtime {runtime}; code {code_bytes} bytes, sha256 {code_sha256}; stdin {stdin_bytes} bytes; network {network}; session {session}."},
		{Text: "Files to stage: {file_count} ({file_bytes} bytes); artifact patterns: {artifacts}."},
		{Text: "Env names: {env_names}; values {env|or:not recorded (--audit-env-values records them)}{env_values_recorded|hide}."},
		{Text: "Limits decided: {limits}."},
		{Text: "Environment {environment}, digest {environment_digest}."},
		{Text: "Exec slot: {admission}; session: {session_id}."},
		{Text: "Mode {mode}; entrypoint {entrypoint} with {inputs_bytes} bytes of inputs."},
		{Text: "A health probe's exec: {probe}."},
	}
}

// Prepare is the facts of the prepare step: where the exec runs and what it
// is held to, written after the workspace is ready and just before the
// privileged helper is started. A failed prepare has no facts.
type Prepare struct {
	Workspace     string  `json:"workspace" audit:"required" doc:"host path of the workspace"`
	WorkspaceKind string  `json:"workspace_kind" audit:"required" doc:"one-shot or session"`
	Files         int     `json:"files" doc:"files staged"`
	FileBytes     int64   `json:"file_bytes" doc:"bytes written beneath the workspace by package workspace: each name resolved by openat2 (RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS, RESOLVE_NO_XDEV) relative to the workspace's directory fd, or a per-component openat(O_NOFOLLOW) walk where openat2 is missing; not os.Root, which follows symlinks that stay inside the root (workspace/doc.go)"`
	Stdio         string  `json:"stdio" doc:"pipes"`
	CgroupMode    string  `json:"cgroup_mode,omitzero" doc:"v2, v1 or none: whether a per-exec cgroup enforces memory, pids and CPU"`
	Cgroup        string  `json:"cgroup,omitzero" doc:"the same as cgroup_mode, in records written before it was renamed"`
	Limits        *Limits `json:"limits,omitempty" audit:"required" doc:"the limits as applied: without a cgroup memory_bytes, pids, cpus are 0 (not enforced, not claimed); the exec result's policy.limits"`
	QuotaBytes    int64   `json:"quota_bytes" doc:"the workspace disk quota"`
	Probe         bool    `json:"probe,omitzero" doc:"the record of a health probe (GET /v1/health ran a probe exec through the whole launch)"`
	Kernel        string  `json:"kernel,omitzero" doc:"a long-lived launch of a runner: session (a session's kernel; its launch id is the kernel id), once (a process-mode exec run through its runner) or warm (a warm pool sandbox waiting for one one-shot exec)"`
}

// Step implements Facts.
func (*Prepare) Step() string { return StepPrepare }

// Sentences implements Facts.
func (*Prepare) Sentences() []Sentence {
	return []Sentence{
		{Text: "Workspace {workspace} ({workspace_kind}); staged {files} files ({file_bytes} bytes); stdio over {stdio}; cgroup {cgroup_mode/cgroup}."},
		{Text: "Workspace disk quota {quota_bytes} bytes."},
		{Text: "Limits as applied: {limits}."},
		{Text: "A health probe's exec: {probe}."},
		{Text: "A runner's launch: {kernel}."},
	}
}

// Usage is the payload's resource use (the exec result's usage).
type Usage struct {
	CPUMS    int64 `json:"cpu_ms"`
	MaxRSSKB int64 `json:"max_rss_kb"`
	// Source says where the figures come from: cgroup, rusage, mixed,
	// cgroup_lifetime_peak or none (docs/API.md, usage); absent in
	// records written before it was recorded.
	Source string `json:"source,omitempty"`
}

// Reap is the facts of the reap step: how the exec ended, written after
// every process of it is gone and before the answer is sent. An ok reap
// has the outcome; a failed one (the payload never ran) helper_exit and
// stderr_head.
type Reap struct {
	ExitCode            *int      `json:"exit_code,omitempty" doc:"bwrap's --json-status-fd exit code; null when killed by a signal"`
	Signal              *string   `json:"signal,omitempty" doc:"the signal that ended the payload (128+N from bwrap = signal N); a timeout is SIGKILL by the supervisor"`
	TimedOut            bool      `json:"timed_out,omitzero" doc:"the supervisor killed it at the timeout"`
	DurationMS          int64     `json:"duration_ms,omitzero" doc:"wall clock from launch to reap"`
	Usage               *Usage    `json:"usage,omitempty" doc:"cpu_ms, max_rss_kb and their source: the exec's cgroup (a kernel exec: its kernel's cgroup during the exec), else the helper's wait4 rusage (API.md, usage)"`
	BwrapChildPID       int       `json:"bwrap_child_pid,omitzero" doc:"the sandbox's pid 1 (bwrap's reaper), host pid"`
	StdoutBytes         int64     `json:"stdout_bytes,omitzero" doc:"bytes the payload wrote to stdout"`
	StderrBytes         int64     `json:"stderr_bytes,omitzero" doc:"bytes the payload wrote to stderr"`
	StdoutTruncated     bool      `json:"stdout_truncated,omitzero" doc:"the output limit cut stdout"`
	StderrTruncated     bool      `json:"stderr_truncated,omitzero" doc:"the output limit cut stderr"`
	PIDNamespaceGone    bool      `json:"pid_namespace_gone,omitzero" doc:"the reaper's pidfd became readable: the kernel had killed every process of the pid namespace"`
	OOMKilled           bool      `json:"oom_killed,omitzero" doc:"the exec's cgroup recorded an OOM kill"`
	CgroupProcessesLeft int       `json:"cgroup_processes_left,omitzero" doc:"processes left in the exec's cgroup once the sandbox's pid 1 was gone"`
	QuotaExceeded       bool      `json:"quota_exceeded,omitzero" doc:"the workspace went over its quota (seen by the watcher during the run or the check after it)"`
	QuotaError          string    `json:"quota_error,omitzero" doc:"the workspace's size could not be measured, which counts as over the quota (fails closed)"`
	Stopped             string    `json:"stopped,omitzero" doc:"why the supervisor stopped waiting: exited (on its own), timeout, cancelled, quota, permit"`
	HelperExit          *int      `json:"helper_exit,omitempty" doc:"on failure: the helper's (or bwrap's) exit status"`
	StderrHead          *string   `json:"stderr_head,omitempty" doc:"on failure: the first 512 bytes of the helper's/bwrap's stderr"`
	Probe               bool      `json:"probe,omitzero" doc:"the record of a health probe (GET /v1/health ran a probe exec through the whole launch)"`
	KernelID            string    `json:"kernel_id,omitzero" doc:"an exec in a session's kernel: the kernel's launch id"`
	ExecutionCount      int64     `json:"execution_count,omitzero" doc:"the kernel's execution count after this exec"`
	Displays            int       `json:"displays,omitzero" doc:"rich outputs returned"`
	ProtocolError       string    `json:"protocol_error,omitzero" doc:"the kernel broke the channel protocol (I12) and was killed"`
	HelperPooled        bool      `json:"helper_pooled,omitzero" doc:"the launch took a pre-started helper (--helper-pool): started before the request, its prelude done, waiting in its own cgroup, which took the exec's id and limits before the release"`
	LaunchUS            *LaunchUS `json:"launch_us,omitempty" doc:"where the launch's wall clock went, in microseconds (make bench prints the medians)"`
	Warm                bool      `json:"warm,omitzero" doc:"a warm pool sandbox: on an exec's reap, the exec ran in one (launch_id); on the warm launch's own reap, how the sandbox ended"`
	LaunchID            string    `json:"launch_id,omitzero" doc:"an exec a warm sandbox ran: that sandbox's launch id (its prepare and helper step records)"`
	TakenBy             string    `json:"taken_by,omitzero" doc:"on a warm launch's reap: the exec that took it (absent: destroyed unused, e.g. drained or at shutdown)"`
}

// LaunchUS is where one launch's time went, measured by the supervisor.
type LaunchUS struct {
	Acquire  int64 `json:"acquire" doc:"a started helper: the pool's take, or the cgroup's creation with the request's limits and the helper's fork and exec"`
	Barrier  int64 `json:"barrier" doc:"the audit barrier before the release (fdatasync of the records so far)"`
	Place    int64 `json:"place" doc:"acquire's end to the release byte: the cgroup v1 move of a helper not pre-started, a pre-started helper's cgroup taking the exec's id and limits, and the barrier"`
	ToExec   int64 `json:"to_exec" doc:"the release to the helper's exec report: its remaining steps and bubblewrap's fork and exec"`
	Run      int64 `json:"run" doc:"the exec report to the helper's exit: bubblewrap building the sandbox, the payload, bubblewrap's exit"`
	Teardown int64 `json:"teardown" doc:"the helper's exit to every stream, report and process of the exec gone"`
}

// Step implements Facts.
func (*Reap) Step() string { return StepReap }

// Sentences implements Facts.
func (*Reap) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "The payload ended: exit code {exit_code}, signal {signal}, timed out: {timed_out}, after {duration_ms} ms; usage {usage}; OOM-killed: {oom_killed}; workspace quota exceeded: {quota_exceeded}."},
		{When: OnlyOK, Text: "stdout {stdout_bytes} bytes (truncated: {stdout_truncated}), stderr {stderr_bytes} bytes (truncated: {stderr_truncated}); bwrap's child pid {bwrap_child_pid}; pid namespace gone: {pid_namespace_gone}."},
		{When: OnlyOK, Text: "Processes left in the exec's cgroup once the sandbox's pid 1 was gone: {cgroup_processes_left}."},
		{Text: "The supervisor stopped waiting because: {stopped}."},
		{Text: "The workspace's size could not be measured (counted as over the quota): {quota_error}."},
		{Text: "A health probe's exec: {probe}."},
		{When: OnlyFailed, Text: "The helper exited {helper_exit}; its stderr began: {stderr_head|q}."},
		{Text: "In kernel {kernel_id} (execution count {execution_count}); displays {displays}."},
		{Text: "The kernel broke the channel protocol and was killed: {protocol_error}."},
		{Text: "A warm pool sandbox: {warm}."},
		{Text: "Ran in the warm sandbox {launch_id}."},
		{Text: "The warm sandbox was taken by exec {taken_by}."},
		{Text: "The launch took a pre-started helper: {helper_pooled}; its time in µs: {launch_us}."},
	}
}

// KernelExec is the facts of the kernel_exec step: the exec runs in a
// session's kernel, whose own launch records (prepare, the helper's steps,
// reap) are under kernel_id.
type KernelExec struct {
	KernelID  string `json:"kernel_id" audit:"always" doc:"the kernel's launch id"`
	Language  string `json:"language" audit:"always" doc:"python or javascript"`
	Mode      string `json:"mode" doc:"kernel"`
	Restarted bool   `json:"restarted" doc:"the kernel was started for this exec because an earlier one of the session ended"`
	SessionID string `json:"session_id,omitzero" doc:"which session"`
}

// Step implements Facts.
func (*KernelExec) Step() string { return StepKernelExec }

// Sentences implements Facts.
func (*KernelExec) Sentences() []Sentence {
	return []Sentence{{Text: "Sent to the {language} kernel {kernel_id} of session {session_id} (mode {mode}; restarted: {restarted})."}}
}

// WarmExec is the facts of the warm_exec step: a one-shot exec handed to a
// warm pool sandbox, whose own launch records (prepare, the helper's
// steps, reap) are under launch_id. Written after the exec's files were
// staged and its cgroup limits set, before its code was handed over.
type WarmExec struct {
	LaunchID  string  `json:"launch_id" audit:"always" doc:"the warm sandbox's launch id"`
	Runtime   string  `json:"runtime" audit:"always" doc:"python or javascript"`
	Files     int     `json:"files" doc:"files staged into the warm sandbox's workspace"`
	FileBytes int64   `json:"file_bytes" doc:"bytes staged (package workspace, openat2 beneath the workspace, as for a cold prepare)"`
	Limits    *Limits `json:"limits,omitempty" audit:"required" doc:"the exec's limits as applied: the cgroup's memory, pids and CPU were set to them before the code was handed over"`
	Warm      bool    `json:"warm" audit:"always" doc:"always true"`
}

// Step implements Facts.
func (*WarmExec) Step() string { return StepWarmExec }

// Sentences implements Facts.
func (*WarmExec) Sentences() []Sentence {
	return []Sentence{
		{Text: "Handed to the warm {runtime} sandbox {launch_id} (warm: {warm}); staged {files} files ({file_bytes} bytes); limits set: {limits}."},
	}
}

// Outcome says how the payload ended, in one phrase.
func (r *Reap) Outcome() string {
	var s string
	switch {
	case r.TimedOut:
		s = "timed out and was killed with " + deref(r.Signal)
	case r.Signal != nil:
		s = "killed by " + *r.Signal
	default:
		s = "exit code " + derefInt(r.ExitCode)
	}
	s += " after " + itoa(r.DurationMS) + " ms"
	if r.Usage != nil {
		s += " (cpu " + itoa(r.Usage.CPUMS) + " ms, max rss " + itoa(r.Usage.MaxRSSKB) + " KiB)"
	}
	if r.OOMKilled {
		s += "; OOM-killed"
	}
	if r.QuotaExceeded {
		s += "; the workspace quota was exceeded"
	}
	return s
}

// Artifact is one collected file.
type Artifact struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// Artifacts is the facts of the artifacts step, written after the reap when
// the request asked for artifacts.
type Artifacts struct {
	Patterns  []string   `json:"patterns" audit:"always" doc:"the patterns asked for"`
	Artifacts []Artifact `json:"artifacts" audit:"always" doc:"each file returned"`
	Truncated bool       `json:"truncated" doc:"the artifact limits cut the list"`
	Probe     bool       `json:"probe,omitzero" doc:"the record of a health probe (GET /v1/health ran a probe exec through the whole launch)"`
}

// Step implements Facts.
func (*Artifacts) Step() string { return StepArtifacts }

// Sentences implements Facts.
func (*Artifacts) Sentences() []Sentence {
	return []Sentence{
		{Text: "Artifacts for patterns {patterns} (truncated: {truncated}):{artifacts|files}"},
		{Text: "A health probe's exec: {probe}."},
	}
}

// Interrupted is the facts of an interrupted record: the supervisor that ran
// the exec stopped (killed or crashed) before it reaped it. Written by the
// next supervisor right after its start record.
type Interrupted struct {
	LastStep        string    `json:"last_step" audit:"always" doc:"the exec's last record before the end"`
	LastSeq         uint64    `json:"last_seq" audit:"always" doc:"its seq"`
	AcceptedAt      time.Time `json:"accepted_at" audit:"always" doc:"time of the exec's accept"`
	FoundAtStartSeq uint64    `json:"found_at_start_seq" audit:"always" doc:"the start record of the supervisor that found it"`
	Kernel          bool      `json:"kernel,omitempty" doc:"the trail is a session kernel's launch (it began at prepare; accepted_at is then that record's time)"`
}

// Step implements Facts.
func (*Interrupted) Step() string { return StepInterrupted }

// Sentences implements Facts.
func (*Interrupted) Sentences() []Sentence {
	return []Sentence{{Text: "Found by the next supervisor at start-up (start record seq {found_at_start_seq}): the last record of the exec was {last_step} (seq {last_seq}), accepted at {accepted_at}; a session kernel's launch: {kernel}."}}
}

// Egress is the facts of an egress record: one connection attempt through
// the exec's egress proxy, allowed or refused (ok is whether it was
// allowed). Host and port are what the sandbox asked for: untrusted.
type Egress struct {
	Method     string `json:"method,omitzero" doc:"CONNECT, or the plain-HTTP method; empty when the request was unreadable"`
	Host       string `json:"host,omitzero" doc:"the destination host as requested (the CONNECT authority or the URL's host)"`
	Port       int    `json:"port,omitzero" doc:"the destination port as requested"`
	Address    string `json:"address,omitzero" doc:"the address the proxy resolved and dialled, or the one it refused"`
	AllowNet   string `json:"allow_net,omitzero" doc:"the operator's --egress-allow-net range that admitted address (not a public address: an internal mirror reached through an allowlisted name); absent for a public address and for a refusal"`
	Allowed    bool   `json:"allowed" audit:"always" doc:"the proxy connected to the destination"`
	Reason     string `json:"reason,omitzero" doc:"why it was refused or cut, or the allowlist rule that allowed it"`
	BytesOut   int64  `json:"bytes_out" audit:"always" doc:"bytes from the sandbox to the destination"`
	BytesIn    int64  `json:"bytes_in" audit:"always" doc:"bytes from the destination to the sandbox"`
	DurationMS int64  `json:"duration_ms" audit:"always" doc:"from accepting the relay's connection to closing both sides"`
}

// Step implements Facts.
func (*Egress) Step() string { return StepEgress }

// Sentences implements Facts.
func (*Egress) Sentences() []Sentence {
	return []Sentence{
		{Text: "Egress {method} {host}:{port} (address {address}): allowed {allowed}; {reason}."},
		{Text: "Admitted by the opted-in range {allow_net} (--egress-allow-net)."},
		{Text: "{bytes_out} bytes out, {bytes_in} bytes in, {duration_ms} ms."},
	}
}
