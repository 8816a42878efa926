package policy

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
)

// Request is what the decide step judges: an exec body as the API decoded
// it, and whether it runs in a session (which has its own timeout cap).
type Request struct {
	Exec    api.ExecRequest
	Session bool
	// SessionEnvironment is the session's default environment, if any.
	SessionEnvironment string
}

// Caller is who asked: over the Unix socket, the kernel's peer credentials
// (SO_PEERCRED); over TCP, the name of the API key the request presented
// (UID, GID and PID are then -1: a TCP peer has no uid the kernel vouches
// for). Per-caller rules belong in Decide, next to the others
// (DecideNetwork: egress).
type Caller struct {
	UID int
	GID int
	PID int
	// Key is the name of the API key a TCP caller authenticated with;
	// empty for a Unix-socket peer.
	Key string
	// Admin is set for an API key marked admin in the keys file: it sees
	// every caller's sessions, as root and the supervisor's uid do.
	Admin bool
	// Egress is set for an API key marked egress in the keys file: it may
	// ask for network "egress" (the key's counterpart of --egress-allow-uid).
	Egress bool
}

// ID is the caller's identity, the key of ownership, per-caller limits and
// fairness: "key:<name>" for an API key, "uid:<n>" for a Unix-socket peer.
// The prefixes keep the two namespaces apart, so a key named "1000" is not
// uid 1000.
func (c Caller) ID() string {
	if c.Key != "" {
		return "key:" + c.Key
	}
	return "uid:" + strconv.Itoa(c.UID)
}

// StagedFile is a decoded file of the request, to be placed in the
// workspace before the run.
type StagedFile struct {
	Path    string
	Content []byte
}

// Decision is an exec that policy accepted, with every value the launch
// uses already validated and clamped, and the facts of the decide record.
type Decision struct {
	Runtime   string
	Code      string
	Stdin     []byte
	Files     []StagedFile
	FileBytes int64             // the decoded files' total size
	Env       map[string]string // never nil
	Limits    Limits
	Artifacts []string
	Network   string
	// Mode is "kernel" or "process" (policy.Mode).
	Mode       string
	Entrypoint string
	Inputs     json.RawMessage // nil, or one JSON object
	// Environment is the environment the exec runs in (Name "" for none).
	Environment api.Environment
	// Facts are the decide record's facts. On a refusal they hold what was
	// learned before it, so the record says how far the request got.
	Facts *facts.Decide
}

// Decide is the decide step of the launch sequence: it turns a decoded exec
// request into a Decision held to cfg, or refuses it. It is pure: the same
// request, caller and settings always give the same answer, and it reads
// nothing else. A refusal wraps an errdefs class (ErrInvalid, or
// ErrTooLarge for code or files above their limits) and its text is written
// for the caller. On a refusal the returned Decision carries only Facts.
//
// The rules run in API.md's order (the first failure decides): language,
// code, timeout, files, env, artifacts, network, environment.
func Decide(req Request, caller Caller, cfg Config) (Decision, error) {
	r := req.Exec
	f := &facts.Decide{Session: req.Session}
	refuse := func(err error) (Decision, error) { return Decision{Facts: f}, err }

	runtime, err := Runtime(r.Language)
	if err != nil {
		return refuse(err)
	}
	f.Runtime = runtime
	mode, err := Mode(r.Mode, runtime, req.Session)
	if err != nil {
		return refuse(err)
	}
	f.Mode = mode
	inputs, err := Entrypoint(r.Entrypoint, r.Inputs, runtime)
	if err != nil {
		return refuse(err)
	}
	if r.Entrypoint != "" {
		n := len(inputs)
		f.Entrypoint, f.InputsBytes = r.Entrypoint, &n
	}

	if err := decideCode(r.Code, cfg, f); err != nil {
		return refuse(err)
	}
	timeout, err := ClampTimeout(r.TimeoutMS, req.Session, cfg)
	if err != nil {
		return refuse(err)
	}
	fileCount := len(r.Files)
	f.FileCount = &fileCount
	files, fileBytes, err := DecodeFiles(r.Files, cfg.WorkspaceQuotaBytes)
	if err != nil {
		return refuse(err)
	}
	f.FileBytes = &fileBytes
	envFacts(r.Env, cfg.AuditEnvValues, f)
	if err := ValidateEnv(r.Env); err != nil {
		return refuse(err)
	}
	f.Artifacts = r.Artifacts
	if err := validateArtifacts(r.Artifacts); err != nil {
		return refuse(err)
	}
	network, err := DecideNetwork(r.Network, caller, cfg)
	if err != nil {
		return refuse(err)
	}
	f.Network = network
	environment, err := decideEnvironment(req, runtime, cfg, f)
	if err != nil {
		return refuse(err)
	}

	limits := cfg.Limits(timeout)
	decided, stdinBytes := facts.Limits(limits), len(r.Stdin)
	f.Limits, f.StdinBytes = &decided, &stdinBytes
	env := r.Env
	if env == nil {
		env = map[string]string{}
	}
	return Decision{
		Runtime: runtime, Code: r.Code, Stdin: []byte(r.Stdin), Files: files, FileBytes: fileBytes,
		Env: env, Limits: limits, Artifacts: r.Artifacts, Network: network, Environment: environment, Facts: f,
		Mode: mode, Entrypoint: r.Entrypoint, Inputs: inputs,
	}, nil
}

// decideCode checks the program text: not empty, within the operator's
// size limit (413 above it), and free of NUL, which would cut the code
// file short in ways that differ between runtimes.
func decideCode(code string, cfg Config, f *facts.Decide) error {
	n := len(code)
	f.CodeBytes = &n
	if code == "" {
		return invalid("code is required and must not be empty")
	}
	if int64(len(code)) > cfg.MaxCodeBytes {
		return errdefs.New(errdefs.ErrTooLarge, fmt.Sprintf("code is %d bytes; the limit is %d", len(code), cfg.MaxCodeBytes), "", nil)
	}
	if strings.IndexByte(code, 0) >= 0 {
		return invalid("code contains a NUL byte")
	}
	sum := sha256.Sum256([]byte(code))
	f.CodeSHA256 = hex.EncodeToString(sum[:])
	return nil
}

// envFacts records the env's names, and its values only when the operator
// asked for them (--audit-env-values): values may be secrets and the audit
// log outlives them.
func envFacts(env map[string]string, values bool, f *facts.Decide) {
	f.EnvNames = slices.Sorted(maps.Keys(env))
	f.EnvValuesRecorded = &values
	if values {
		f.Env = maps.Clone(env)
	}
}

func validateArtifacts(patterns []string) error {
	if len(patterns) > MaxArtifactPatterns {
		return invalid("artifacts has %d patterns; at most %d are allowed", len(patterns), MaxArtifactPatterns)
	}
	for i, p := range patterns {
		if err := ValidateArtifactPattern(p); err != nil {
			return invalid("artifacts[%d]: %v", i, err)
		}
	}
	return nil
}

// DecodeFiles validates and decodes a request's files. Beyond each path
// being a clean workspace path, no path may appear twice or be both a file
// and a directory ("a" and "a/b"): either would make the staged workspace
// depend on the order the launcher writes files in. The decoded contents
// together may not exceed quotaBytes (413).
func DecodeFiles(in []api.ExecFile, quotaBytes int64) ([]StagedFile, int64, error) {
	if len(in) > MaxFiles {
		return nil, 0, invalid("files has %d entries; at most %d are allowed", len(in), MaxFiles)
	}
	out := make([]StagedFile, 0, len(in))
	seen := make(map[string]int, len(in))
	var total int64
	for i, f := range in {
		if err := ValidateWorkspacePath(f.Path); err != nil {
			return nil, 0, invalid("files[%d].path: %v", i, err)
		}
		if j, dup := seen[f.Path]; dup {
			return nil, 0, invalid("files[%d].path %q is the same as files[%d].path", i, f.Path, j)
		}
		seen[f.Path] = i
		content, err := base64.StdEncoding.DecodeString(f.ContentBase64)
		if err != nil {
			return nil, 0, invalid("files[%d].content_base64: not valid standard base64: %v", i, err)
		}
		total += int64(len(content))
		if total > quotaBytes {
			return nil, 0, errdefs.New(errdefs.ErrTooLarge, fmt.Sprintf("files add up to more than the workspace quota of %d bytes", quotaBytes), "", nil)
		}
		out = append(out, StagedFile{Path: f.Path, Content: content})
	}
	// Sorted, so that of several clashes the same one is reported each time.
	for _, p := range slices.Sorted(maps.Keys(seen)) {
		for dir := parentDir(p); dir != ""; dir = parentDir(dir) {
			if j, clash := seen[dir]; clash {
				return nil, 0, invalid("files[%d].path %q is a directory of files[%d].path %q; a path cannot be both", j, dir, seen[p], p)
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
