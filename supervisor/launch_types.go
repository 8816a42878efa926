package supervisor

import (
	"context"
	"errors"
	"fmt"

	"github.com/sandboxd/sandboxd/policy"
)

// Caller is the peer of an API request, from SO_PEERCRED.
type Caller struct {
	UID int
	GID int
	PID int
}

// StagedFile is a file placed in the workspace before the payload runs. Path
// is relative to the workspace and already validated by the API layer.
type StagedFile struct {
	Path    string
	Content []byte
}

// LaunchRequest is a decided exec: validated and clamped by policy, ready to run.
type LaunchRequest struct {
	ExecID    string
	Caller    Caller
	Runtime   string // "python" or "javascript"
	Code      string
	Stdin     []byte
	Files     []StagedFile
	Env       map[string]string // names already validated
	Limits    policy.Limits
	Artifacts []string // glob patterns relative to /workspace
	Network   string   // "none"
	// SessionWorkspace names a session's workspace directory below the
	// workspace root; empty for a one-shot exec (fresh workspace, removed).
	SessionWorkspace string
}

// Usage is the payload's resource usage.
type Usage struct {
	CPUMS    int64 `json:"cpu_ms"`
	MaxRSSKB int64 `json:"max_rss_kb"`
}

// Artifact is one collected output file.
type Artifact struct {
	Path          string `json:"path"`
	Size          int64  `json:"size"`
	SHA256        string `json:"sha256"`
	ContentBase64 string `json:"content_base64"`
}

// PolicyAttestation says what a run was held to; the same values are in the
// audit records.
type PolicyAttestation struct {
	ProfileSHA256 string        `json:"profile_sha256"`
	Limits        policy.Limits `json:"limits"`
	MountsSHA256  string        `json:"mounts_sha256"`
	HelperVersion string        `json:"helper_version"`
}

// ExecResult is the 200 body of an exec (API.md).
type ExecResult struct {
	ID                 string            `json:"id"`
	ExitCode           *int              `json:"exit_code"`
	Signal             *string           `json:"signal"`
	TimedOut           bool              `json:"timed_out"`
	OOMKilled          bool              `json:"oom_killed"`
	QuotaExceeded      bool              `json:"quota_exceeded"`
	Stdout             string            `json:"stdout"`
	Stderr             string            `json:"stderr"`
	StdoutTruncated    bool              `json:"stdout_truncated"`
	StderrTruncated    bool              `json:"stderr_truncated"`
	DurationMS         int64             `json:"duration_ms"`
	Usage              Usage             `json:"usage"`
	Artifacts          []Artifact        `json:"artifacts"`
	ArtifactsTruncated bool              `json:"artifacts_truncated"`
	Policy             PolicyAttestation `json:"policy"`
}

// Launcher runs one decided exec under the sandbox and reaps it. A payload
// that fails is a result, not an error; errors are for launches that could
// not happen (*LaunchError) or were cancelled by ctx.
type Launcher interface {
	Launch(ctx context.Context, req LaunchRequest) (*ExecResult, error)
}

// LaunchErrorKind says how an API layer should answer a failed launch.
type LaunchErrorKind int

const (
	// KindUnavailable: the host cannot sandbox right now (503 unavailable).
	KindUnavailable LaunchErrorKind = iota + 1
	// KindInvalid: the request cannot be launched as asked (400 invalid_argument).
	KindInvalid
	// KindInternal: a bug (500 internal).
	KindInternal
	// KindQuota: the workspace disk quota is full (507 quota_exceeded).
	KindQuota
	// KindForbidden: a path escapes the workspace (403 forbidden).
	KindForbidden
)

// LaunchError is a launch that did not produce a payload result.
type LaunchError struct {
	Kind   LaunchErrorKind
	Reason string // what went wrong, for the caller
	Fix    string // how an operator fixes it; empty when there is nothing to fix
	Err    error
}

func (e *LaunchError) Error() string {
	msg := e.Reason
	if e.Fix != "" {
		msg += "; fix: " + e.Fix
	}
	if e.Err != nil {
		msg = fmt.Sprintf("%s (%v)", msg, e.Err)
	}
	return msg
}

func (e *LaunchError) Unwrap() error { return e.Err }

// AsLaunchError returns the *LaunchError in err's chain, if any.
func AsLaunchError(err error) (*LaunchError, bool) {
	var le *LaunchError
	ok := errors.As(err, &le)
	return le, ok
}

// HealthChecks are the host checks of GET /v1/health. Each string is "ok" or
// the reason it is not (with the fix); Cgroups is "v2", "v1" or "none".
type HealthChecks struct {
	Bwrap   string `json:"bwrap"`
	Userns  string `json:"userns"`
	Seccomp string `json:"seccomp"`
	Helper  string `json:"helper"`
	Cgroups string `json:"cgroups"`
	Disk    string `json:"disk"`
}

// Ready reports whether every check that gates launches passed.
func (h HealthChecks) Ready() bool {
	return h.Bwrap == "ok" && h.Userns == "ok" && h.Seccomp == "ok" && h.Helper == "ok" && h.Disk == "ok"
}

// Prober checks whether the host can sandbox right now.
type Prober interface {
	Probe(ctx context.Context) HealthChecks
}
