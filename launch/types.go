package launch

import (
	"context"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/policy"
)

// Caller is the peer of an API request, from SO_PEERCRED (the decide
// step's type).
type Caller = policy.Caller

// StagedFile is a file placed in the workspace before the payload runs. Path
// is relative to the workspace and already validated by the decide step.
type StagedFile = policy.StagedFile

// Request is a decided exec: validated and clamped by policy, ready to run.
type Request struct {
	ExecID    string
	Caller    Caller
	Runtime   string // "python" or "javascript"
	Code      string
	Stdin     []byte
	Files     []StagedFile
	Env       map[string]string // names already validated
	Limits    policy.Limits
	Artifacts []string // glob patterns relative to /workspace
	Network   string   // "none" or "egress"
	// Egress is the token (one path component below the helper's
	// egress_dir) of the exec's proxy socket directory; network "egress" only.
	Egress string
	// Environment names an environment of the helper config ("" none).
	Environment string
	// SessionWorkspace names a session's workspace directory below the
	// workspace root; empty for a one-shot exec (fresh workspace, removed).
	SessionWorkspace string
	// Probe marks a health probe (Runtime "probe"): every supervisor
	// record of its trail carries the fact probe: true.
	Probe bool
	// Kernel, for a long-lived launch (Start), says what it is: "session"
	// (a session's kernel), "once" (a process-mode exec run through the
	// runner) or KernelWarm; its prepare record carries it.
	Kernel string
	// Output, when set, sees each chunk of the payload's stdout ("stdout")
	// and stderr ("stderr") as it is read, before the caps (streaming); it
	// runs on the reading goroutine and must not block for long.
	Output func(stream string, p []byte)
}

// The wire types a launch produces; package api owns them.
type (
	Usage             = api.Usage
	Artifact          = api.Artifact
	PolicyAttestation = api.PolicyAttestation
	EnvironmentRef    = api.EnvironmentRef
	ExecResult        = api.ExecResult
)

// Launcher runs one decided exec under the sandbox and reaps it. A payload
// that fails is a result, not an error; errors are for launches that could
// not happen (an *errdefs.Error of class ErrUnavailable, ErrInvalid,
// ErrQuota, ErrForbidden or ErrInternal) or were cancelled by ctx.
type Launcher interface {
	Launch(ctx context.Context, req Request) (*ExecResult, error)
}

// HealthChecks are the host checks of GET /v1/health (package api owns
// the type).
type HealthChecks = api.HealthChecks

// Prober checks whether the host can sandbox right now. by is the peer
// asking; a probe that launches is audited under its credentials.
type Prober interface {
	Probe(ctx context.Context, by Caller) HealthChecks
}
