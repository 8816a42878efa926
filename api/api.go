package api

import (
	"encoding/json"
	"strings"
	"time"
)

// ExecIDHeader carries the exec id on every answer of an exec endpoint,
// refusals included, so a caller can find the audit records of a request
// that never produced a result.
const ExecIDHeader = "X-Sandboxd-Exec-Id"

// RetryAfterHeader is sent with every limit_exceeded answer (seconds).
const RetryAfterHeader = "Retry-After"

// DefaultSocket is the supervisor's default socket.
const DefaultSocket = "/run/sandboxd/sandboxd.sock"

// The languages of ExecRequest.Language.
const (
	LanguagePython     = "python"
	LanguageJavaScript = "javascript"
	LanguageShell      = "shell"
)

// The modes of ExecRequest.Mode.
const (
	ModeKernel  = "kernel"  // the session's kernel of the language (session default); one-shot, a throwaway kernel
	ModeProcess = "process" // a fresh interpreter (one-shot default)
)

// The MIME types of Display.MIME: binary ones travel as DataBase64, the
// text ones as a JSON string in Data, the JSON ones as an object in Data.
const (
	DisplayPNG      = "image/png"
	DisplayJPEG     = "image/jpeg"
	DisplaySVG      = "image/svg+xml"
	DisplayHTML     = "text/html"
	DisplayMarkdown = "text/markdown"
	DisplayLatex    = "text/latex"
	DisplayText     = "text/plain"
	DisplayJSON     = "application/json"
	DisplayPlotly   = "application/vnd.plotly.v1+json" // a plotly figure
)

// DisplayMIMEs lists every display MIME type, in the order of the OpenAPI
// file's enum.
func DisplayMIMEs() []string {
	return []string{DisplayPNG, DisplayJPEG, DisplaySVG, DisplayHTML, DisplayMarkdown, DisplayLatex,
		DisplayText, DisplayJSON, DisplayPlotly}
}

// NDJSONType is the Accept value that asks for a streamed exec.
const NDJSONType = "application/x-ndjson"

// Network modes. NetworkNone: an own network namespace with only loopback
// ("" means the same). NetworkEgress: the same, plus a relay on loopback
// to the operator's allowlist proxy (HTTP_PROXY and friends are set).
const (
	NetworkNone   = "none"
	NetworkEgress = "egress"
)

// ExecRequest is the body of POST /v1/exec and POST /v1/sessions/{id}/exec.
// JSON null for a field equals its absence.
type ExecRequest struct {
	Language  string            `json:"language"`
	Code      string            `json:"code"`
	Stdin     string            `json:"stdin,omitempty"`
	Files     []ExecFile        `json:"files,omitempty"`
	Env       map[string]string `json:"env,omitempty"`
	TimeoutMS *int64            `json:"timeout_ms,omitempty"`
	Artifacts []string          `json:"artifacts,omitempty"`
	Network   string            `json:"network,omitempty"`
	// Mode is "kernel" or "process"; "" is "kernel" in a session and
	// "process" one-shot. One-shot "kernel" runs the code in a throwaway
	// kernel (displays such as plt.show() come back, as in a session).
	Mode string `json:"mode,omitempty"`
	// Entrypoint names the function called after the code with Inputs.
	Entrypoint string `json:"entrypoint,omitempty"`
	// Inputs is a JSON object passed to Entrypoint.
	Inputs json.RawMessage `json:"inputs,omitempty"`
	// Environment names an environment (GET /v1/environments); empty: the
	// session's, else the language's default.
	Environment string `json:"environment,omitempty"`
}

// ExecFile is one file staged into the workspace before the run.
type ExecFile struct {
	Path          string `json:"path"`
	ContentBase64 string `json:"content_base64,omitempty"`
}

// ExecResult is the 200 body of an exec. A payload that failed is a result,
// not an API error.
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
	// Kernel is set for an exec that ran in a session's kernel.
	Kernel *KernelInfo `json:"kernel,omitempty"`
	// Displays are the rich outputs, in order (python and javascript).
	Displays []Display `json:"displays"`
	// ReturnValue is the entrypoint's JSON return value, when it returned.
	ReturnValue json.RawMessage `json:"return_value,omitempty"`
	// Exception is the uncaught exception or error, if any.
	Exception *Exception `json:"exception,omitempty"`
	// Network is present for network "egress" only.
	Network *NetworkResult `json:"network,omitempty"`
}

// KernelInfo is the kernel an exec ran in.
type KernelInfo struct {
	ID             string `json:"id"`
	ExecutionCount int64  `json:"execution_count"`
	// Restarted: this is the first exec in a kernel started because the
	// previous one ended (timeout, OOM kill, crash, supervisor restart).
	Restarted bool `json:"restarted"`
}

// Display is one rich output: Data (a string for text/plain, text/html,
// text/markdown, text/latex and image/svg+xml; an object for
// application/json and application/vnd.plotly.v1+json) or DataBase64
// (image/png, image/jpeg). MIME is one of the Display* constants.
type Display struct {
	MIME       string          `json:"mime"`
	Data       json.RawMessage `json:"data,omitempty"`
	DataBase64 string          `json:"data_base64,omitempty"`
}

// Exception describes an uncaught exception (Python) or error (JavaScript).
type Exception struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// Kernel is one of a session's kernels, as GET /v1/sessions/{id} and the
// restart endpoint show it.
type Kernel struct {
	ID             string    `json:"id"`
	Language       string    `json:"language"`
	ExecutionCount int64     `json:"execution_count"`
	StartedAt      time.Time `json:"started_at"`
	MemoryBytes    int64     `json:"memory_bytes"`
	Restarted      bool      `json:"restarted"`
}

// NetworkResult is the egress an exec used: every connection attempt
// through the proxy, allowed or refused.
type NetworkResult struct {
	Mode        string       `json:"mode"`
	Connections []Connection `json:"connections"`
	// Dropped counts attempts over the per-exec connection limit, closed
	// unread and not listed.
	Dropped int `json:"dropped"`
}

// Connection is one attempt through the egress proxy.
type Connection struct {
	Host     string `json:"host"`
	Port     int    `json:"port"`
	Allowed  bool   `json:"allowed"`
	Reason   string `json:"reason"`
	BytesOut int64  `json:"bytes_out"`
	BytesIn  int64  `json:"bytes_in"`
}

// Usage is the payload's resource usage.
type Usage struct {
	CPUMS    int64 `json:"cpu_ms"`
	MaxRSSKB int64 `json:"max_rss_kb"`
	// Source says where the figures come from: UsageSourceCgroup,
	// UsageSourceRusage or UsageSourceMixed (API.md, usage). Absent where
	// the exec kind does not say yet.
	Source string `json:"source,omitempty"`
}

// Sources of an exec's usage.
const (
	// UsageSourceCgroup: both figures from the exec's own cgroup -- CPU
	// time of every process that ran in it, and its memory peak.
	UsageSourceCgroup = "cgroup"
	// UsageSourceRusage: both from the helper's wait4 rusage (no cgroup):
	// the processes it waited for only, max_rss_kb the largest one's RSS.
	UsageSourceRusage = "rusage"
	// UsageSourceMixed: cpu_ms from the cgroup, max_rss_kb from rusage (a
	// cgroup v2 kernel before 5.19 keeps no memory.peak).
	UsageSourceMixed = "mixed"
	// UsageSourceLifetimePeak: a session kernel's exec on a kernel that
	// cannot reset a cgroup's memory peak (v2 before Linux 6.12): cpu_ms
	// is the exec's, from the kernel's cgroup, max_rss_kb the kernel
	// cgroup's peak since the kernel started.
	UsageSourceLifetimePeak = "cgroup_lifetime_peak"
	// UsageSourceNone: nothing measured the exec (a session kernel's exec
	// without cgroups: the kernel process is not waited for per exec);
	// both figures are 0.
	UsageSourceNone = "none"
)

// Artifact is one collected output file; size, sha256 and content are of
// the bytes actually read.
type Artifact struct {
	Path          string `json:"path"`
	Size          int64  `json:"size"`
	SHA256        string `json:"sha256"`
	ContentBase64 string `json:"content_base64"`
}

// PolicyAttestation says what a run was held to; the same values are in
// the exec's audit records.
type PolicyAttestation struct {
	ProfileSHA256 string `json:"profile_sha256"`
	Limits        Limits `json:"limits"`
	MountsSHA256  string `json:"mounts_sha256"`
	HelperVersion string `json:"helper_version"`
	// Environment is the environment the run had, as the helper checked
	// it; absent when it ran in none.
	Environment *EnvironmentRef `json:"environment,omitempty"`
}

// Limits are what one exec is held to, after clamping to the operator's
// caps (package policy computes them; the type is here because the field
// names are part of the wire contract).
type Limits struct {
	TimeoutMS        int64   `json:"timeout_ms"`
	OutputLimitBytes int64   `json:"output_limit_bytes"` // per stream
	TmpSizeBytes     int64   `json:"tmp_size_bytes"`
	MemoryBytes      int64   `json:"memory_bytes"` // 0: ran without a cgroup
	Pids             int64   `json:"pids"`         // 0: ran without a cgroup
	CPUs             float64 `json:"cpus"`         // 0: ran without a cgroup
	NoFile           uint64  `json:"nofile"`
	FileSizeBytes    uint64  `json:"file_size_bytes"`
}

// Timeout returns the exec timeout as a duration.
func (l Limits) Timeout() time.Duration { return time.Duration(l.TimeoutMS) * time.Millisecond }

// Liveness is the body of GET /healthz: served on every listener without
// authentication, for load balancers; it says the process answers and its
// version, and nothing else.
type Liveness struct {
	OK      bool   `json:"ok"`
	Version string `json:"version"`
}

// Health is the body of GET /v1/health, ready (200) or not (503).
type Health struct {
	OK bool `json:"ok"`
	// Status is HealthReady, HealthDegraded (ready, but memory, pids and
	// CPU limits are not enforced -- cgroups "none", which only a
	// supervisor started with --allow-no-cgroups runs with -- or the
	// archive store failing) or HealthNotReady.
	Status   string       `json:"status"`
	Version  string       `json:"version"`
	Checks   HealthChecks `json:"checks"`
	Runtimes []string     `json:"runtimes"`
	// Environments are the configured environments and whether each tree
	// is as registered; they do not gate readiness (a broken one refuses
	// only its own execs).
	Environments []EnvironmentHealth `json:"environments,omitempty"`
	// Keys is the API keys file of the TCP listeners; absent without one.
	// It does not gate readiness.
	Keys *KeysHealth `json:"keys,omitempty"`
}

// KeysHealth is the keys section of GET /v1/health.
type KeysHealth struct {
	// LoadedAt is when the keys in force were loaded (at start or by the
	// last reload that succeeded).
	LoadedAt time.Time `json:"loaded_at"`
	// Keys is how many keys are in force.
	Keys int `json:"keys"`
	// LastReloadError is why the last reload (SIGHUP) failed, when one
	// failed after LoadedAt: the keys loaded before stay in force,
	// including any the file meant to revoke.
	LastReloadError   string     `json:"last_reload_error,omitempty"`
	LastReloadErrorAt *time.Time `json:"last_reload_error_at,omitempty"`
}

// EnvironmentHealth is one environment in GET /v1/health.
type EnvironmentHealth struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
	// Status is "ok" or why the environment's execs are refused.
	Status string `json:"status"`
}

// Values of Health.Status.
const (
	HealthReady    = "ready"
	HealthDegraded = "degraded"
	HealthNotReady = "not_ready"
)

// Status is the Health.Status these checks make.
func (h HealthChecks) Status() string {
	switch {
	case !h.Ready():
		return HealthNotReady
	case h.Cgroups == "none" || strings.HasPrefix(h.Archive, "degraded"):
		return HealthDegraded
	}
	return HealthReady
}

// CheckOK is the value of a check that passed.
const CheckOK = "ok"

// HealthChecks are the host checks of GET /v1/health. Each string is "ok"
// or the reason it is not (with the fix); Cgroups is "v2", "v1" or "none"
// and does not gate readiness ("none" makes the status degraded).
type HealthChecks struct {
	Bwrap   string `json:"bwrap"`
	Userns  string `json:"userns"`
	Seccomp string `json:"seccomp"`
	Helper  string `json:"helper"`
	Cgroups string `json:"cgroups"`
	Disk    string `json:"disk"`
	// Archive is "ok", absent when archives are off, or "degraded: <why>" while the last archive
	// store operation failed. It never gates readiness: archives are best
	// effort (degraded, not down).
	Archive string `json:"archive,omitempty"`
}

// Ready reports whether every check that gates launches passed.
func (h HealthChecks) Ready() bool {
	return h.Bwrap == CheckOK && h.Userns == CheckOK && h.Seccomp == CheckOK && h.Helper == CheckOK && h.Disk == CheckOK
}

// Check is one named health check.
type Check struct {
	Name  string // the JSON name
	Value string
}

// List returns the checks in the order API.md gives them.
func (h HealthChecks) List() []Check {
	return []Check{
		{"bwrap", h.Bwrap}, {"userns", h.Userns}, {"seccomp", h.Seccomp},
		{"helper", h.Helper}, {"cgroups", h.Cgroups}, {"disk", h.Disk}, {"archive", h.Archive},
	}
}

// SessionCreateRequest is the (optional) body of POST /v1/sessions.
type SessionCreateRequest struct {
	TTLSeconds *int64 `json:"ttl_seconds,omitempty"`
	Key        string `json:"key,omitempty"`
	// Network is the session's network mode; it holds for every exec in it.
	Network string `json:"network,omitempty"`
	// Environment is the session's default environment for its execs.
	Environment string `json:"environment,omitempty"`
}

// MaxSessionKeyBytes bounds SessionCreateRequest.Key.
const MaxSessionKeyBytes = 256

// Session is the API's session object.
type Session struct {
	ID         string    `json:"id"`
	Key        string    `json:"key,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	ExpiresAt  time.Time `json:"expires_at"`
	LastUsedAt time.Time `json:"last_used_at"`
	TTLSeconds int64     `json:"ttl_seconds"`
	Restored   bool      `json:"restored"`
	DiskBytes  int64     `json:"disk_bytes"`
	Busy       bool      `json:"busy"`
	Kernels    []Kernel  `json:"kernels"`
	Network    string    `json:"network,omitempty"`
	// Environment is the session's default environment, if it set one.
	Environment string `json:"environment,omitempty"`
}

// SessionList is the body of GET /v1/sessions, oldest first.
type SessionList struct {
	Sessions []Session `json:"sessions"`
}

// FileInfo is one entry of a session's file listing.
type FileInfo struct {
	Path       string    `json:"path"`
	Size       int64     `json:"size"`
	Mode       string    `json:"mode"` // fs.FileMode notation
	ModifiedAt time.Time `json:"modified_at"`
}

// FileList is the body of GET /v1/sessions/{id}/files, sorted by path.
type FileList struct {
	Files []FileInfo `json:"files"`
}

// Uploaded is the 201 body of PUT /v1/sessions/{id}/files/{path}.
type Uploaded struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// EnvironmentRef names an environment and its registered content digest.
type EnvironmentRef struct {
	Name   string `json:"name"`
	Digest string `json:"digest"`
}

// Package is one package an environment declares.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Environment is one entry of GET /v1/environments.
type Environment struct {
	Name     string `json:"name"`
	Language string `json:"language"`
	// Digest covers the tree and the variables (docs/ENVIRONMENTS.md):
	// what results and audit records attest.
	Digest string `json:"digest"`
	// TreeDigest is the tree's registered content digest.
	TreeDigest string `json:"tree_digest"`
	// Env is the variables every payload in the environment gets, by
	// name (a request's env wins over them).
	Env      map[string]string `json:"env"`
	Packages []Package         `json:"packages"`
	Default  bool              `json:"default"`
}

// EnvironmentBuildRequest is the body of POST /v1/environments/build (root
// only): build a pinned environment from a lock inside a sandbox. The
// answer is the build exec's ExecResult, whose one artifact, env.tar, is
// the tree (every entry root-owned, mtime 0); the caller (sandboxctl env
// build, as root) unpacks, hashes and registers it.
type EnvironmentBuildRequest struct {
	Name     string `json:"name"`
	Language string `json:"language"`
	// Lock is requirements.txt (exact pins with sha256 hashes) for python,
	// package-lock.json (lockfileVersion 2 or 3) for javascript.
	Lock string `json:"lock"`
	// Index is a PEP 503 index URL (python; https); Files, the wheels to
	// install from instead (no network). Exactly one of the two.
	Index string     `json:"index,omitempty"`
	Files []ExecFile `json:"files,omitempty"`
	// Registry is the npm registry URL (javascript; https; default
	// https://registry.npmjs.org/).
	Registry string `json:"registry,omitempty"`
	// CAPEM is extra PEM certificates the build trusts for the index or
	// registry (a private one).
	CAPEM     string `json:"ca_pem,omitempty"`
	TimeoutMS *int64 `json:"timeout_ms,omitempty"`
}

// EnvironmentList is the body of GET /v1/environments, by name.
type EnvironmentList struct {
	Environments []Environment `json:"environments"`
}
