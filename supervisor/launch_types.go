package supervisor

import (
	"context"
	"errors"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/policy"
)

// Caller is the peer of an API request, from SO_PEERCRED (the decide
// step's type).
type Caller = policy.Caller

// StagedFile is a file placed in the workspace before the payload runs. Path
// is relative to the workspace and already validated by the decide step.
type StagedFile = policy.StagedFile

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

// The wire types a launch produces; package api owns them.
type (
	Usage             = api.Usage
	Artifact          = api.Artifact
	PolicyAttestation = api.PolicyAttestation
	ExecResult        = api.ExecResult
)

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

func (e *LaunchError) Error() string { return e.Classified().Error() }

// Class is the errdefs class of a kind: the bridge until the launch
// package returns *errdefs.Error itself and LaunchErrorKind goes.
func (k LaunchErrorKind) Class() error {
	switch k {
	case KindUnavailable:
		return errdefs.ErrUnavailable
	case KindInvalid:
		return errdefs.ErrInvalid
	case KindQuota:
		return errdefs.ErrQuota
	case KindForbidden:
		return errdefs.ErrForbidden
	default:
		return errdefs.ErrInternal
	}
}

// Classified is e as an *errdefs.Error of its kind's class.
func (e *LaunchError) Classified() *errdefs.Error {
	return errdefs.New(e.Kind.Class(), e.Reason, e.Fix, e.Err)
}

func (e *LaunchError) Unwrap() error { return e.Err }

// AsLaunchError returns the *LaunchError in err's chain, if any.
func AsLaunchError(err error) (*LaunchError, bool) {
	var le *LaunchError
	ok := errors.As(err, &le)
	return le, ok
}

// HealthChecks are the host checks of GET /v1/health (package api owns
// the type).
type HealthChecks = api.HealthChecks

// Prober checks whether the host can sandbox right now.
type Prober interface {
	Probe(ctx context.Context) HealthChecks
}
