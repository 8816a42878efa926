// Package spec defines the launch spec that the supervisor hands to
// sandboxd-nsinit on an inherited pipe, the helper's step reports, and the
// helper's exit statuses. It is the whole contract across the privilege
// boundary, so it is small, versioned and decoded strictly.
//
// It must never carry anything trust-defining: the bwrap path, runtime
// binaries, bind mounts, profiles and the workspace root come from the
// helper's own root-owned config, never from this spec.
package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandboxd/sandboxd/audit/facts"
)

// Version is the only launch spec version this helper accepts.
const Version = 1

// MaxSize bounds the encoded spec read from the spec fd. Code travels in the
// spec (base64), so this bounds the largest program one launch can carry:
// a little under 6 MiB.
const MaxSize = 8 << 20

// Inherited file descriptors of sandboxd-nsinit. Everything else is closed
// before the helper does anything with its privilege.
const (
	FDSpec   = 3 // read end of a pipe carrying one encoded LaunchSpec
	FDReport = 4 // write end of a pipe for JSON-lines step reports
	FDStatus = 5 // write end handed to bwrap as --json-status-fd
	// FDRelease is the read end of a pipe on which the supervisor writes
	// one byte once the helper sits in the exec's cgroup. The helper execs
	// bwrap only after reading it, so nothing of the sandbox starts outside
	// the cgroup, while the (slow, on cgroup v1) move overlaps the helper's
	// own start-up instead of preceding it.
	FDRelease = 6
)

// Network modes. "none": only loopback. "egress": only loopback too, plus
// a relay on 127.0.0.1 that reaches the supervisor's allowlist proxy over a
// Unix socket in the exec's egress directory.
const (
	NetworkNone   = "none"
	NetworkEgress = "egress"
)

// LaunchSpec is what the supervisor may ask for. Every field is validated by
// the helper against its own config before use.
type LaunchSpec struct {
	Version int    `json:"version"`
	ExecID  string `json:"exec_id"`
	// CallerUID is recorded in the helper's reports; it grants nothing.
	CallerUID int `json:"caller_uid"`
	// Runtime names a runtime in the helper's config ("python", "javascript").
	Runtime string `json:"runtime"`
	// Workspace is a directory name (one path component) below the helper's
	// configured workspace root.
	Workspace string `json:"workspace"`
	// Code is the program text, handed to the runtime as a read-only file.
	// []byte, so it travels base64-encoded: a fixed 4/3 overhead instead of
	// JSON's up-to-6x escaping of control characters.
	Code []byte `json:"code"`
	// Network is the network mode: NetworkNone or NetworkEgress.
	Network string `json:"network"`
	// Egress names the exec's socket directory below the helper's
	// configured egress_dir (one path component); set exactly when Network
	// is "egress". Never a host path.
	Egress string `json:"egress,omitempty"`
	// TmpSizeBytes sizes the sandbox's /tmp tmpfs; clamped by the helper's config.
	TmpSizeBytes int64 `json:"tmp_size_bytes"`
	// Environment names an environment of the helper's config; empty: none.
	// The helper binds its tree only after checking it is as registered.
	Environment string `json:"environment,omitempty"`
	// Process carries the payload's request environment (NAME=value, names
	// already filtered by the supervisor, re-checked here) and rlimits.
	// Args, Cwd, User, Capabilities and the rest must be empty: the helper
	// builds them itself.
	Process specs.Process `json:"process"`
}

// Hand-written matchers rather than regexp: compiling three regexps at
// init cost the helper 0.6 ms of every launch.

// isToken reports whether s is 1-64 characters of [A-Za-z0-9_-]: an exec id
// or a single, dot-free path component.
func isToken(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// IsEnvName reports whether s matches [A-Za-z_][A-Za-z0-9_]*.
func IsEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

// AllowedRlimits are the rlimits a spec may set; the helper clamps each to its config.
var AllowedRlimits = map[string]bool{
	"RLIMIT_CORE": true, "RLIMIT_NOFILE": true, "RLIMIT_FSIZE": true,
	"RLIMIT_STACK": true, "RLIMIT_AS": true, "RLIMIT_MEMLOCK": true,
}

// Decode reads one spec from r, refusing anything over MaxSize, unknown
// fields, trailing data and versions other than Version.
func Decode(r io.Reader) (*LaunchSpec, error) {
	buf, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("read launch spec: %w", err)
	}
	if len(buf) > MaxSize {
		return nil, fmt.Errorf("launch spec larger than %d bytes", MaxSize)
	}
	return DecodeBytes(buf)
}

// DecodeBytes decodes and validates one encoded spec.
func DecodeBytes(buf []byte) (*LaunchSpec, error) {
	var probe struct {
		Version *int `json:"version"`
	}
	if err := json.Unmarshal(buf, &probe); err != nil {
		return nil, fmt.Errorf("decode launch spec: %w", err)
	}
	if probe.Version == nil || *probe.Version != Version {
		return nil, fmt.Errorf("launch spec version %v not supported (want %d)", deref(probe.Version), Version)
	}
	dec := json.NewDecoder(bytes.NewReader(buf))
	dec.DisallowUnknownFields()
	var s LaunchSpec
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode launch spec: %w", err)
	}
	if dec.More() {
		return nil, errors.New("decode launch spec: trailing data after the spec")
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

func deref(p *int) any {
	if p == nil {
		return "missing"
	}
	return *p
}

// Validate checks the spec's shape. Values that depend on the helper's config
// (runtime names, size caps) are checked by the helper.
func (s *LaunchSpec) Validate() error {
	if !isToken(s.ExecID) {
		return fmt.Errorf("exec_id %q: want 1-64 of [A-Za-z0-9_-]", s.ExecID)
	}
	if !isToken(s.Workspace) {
		return fmt.Errorf("workspace %q: want one path component of [A-Za-z0-9_-]", s.Workspace)
	}
	if s.Runtime == "" {
		return errors.New("runtime is required")
	}
	if s.Environment != "" && !isToken(strings.ReplaceAll(s.Environment, ".", "_")) {
		return fmt.Errorf("environment %q: want 1-64 of [A-Za-z0-9._-]", s.Environment)
	}
	switch s.Network {
	case NetworkNone:
		if s.Egress != "" {
			return errors.New("egress is set, but network is \"none\"")
		}
	case NetworkEgress:
		if !isToken(s.Egress) {
			return fmt.Errorf("egress %q: want one path component of [A-Za-z0-9_-]", s.Egress)
		}
	default:
		return fmt.Errorf("network mode %q not supported", s.Network)
	}
	if s.TmpSizeBytes < 0 {
		return fmt.Errorf("tmp_size_bytes %d is negative", s.TmpSizeBytes)
	}
	if bytes.IndexByte(s.Code, 0) >= 0 {
		return errors.New("code contains a NUL byte")
	}
	p := s.Process
	if len(p.Args) != 0 || p.CommandLine != "" || p.Cwd != "" || p.Capabilities != nil ||
		p.User.UID != 0 || p.User.GID != 0 || len(p.User.AdditionalGids) != 0 || p.User.Username != "" || p.User.Umask != nil ||
		p.Terminal || p.ConsoleSize != nil || p.ApparmorProfile != "" || p.SelinuxLabel != "" ||
		p.OOMScoreAdj != nil || p.Scheduler != nil || p.IOPriority != nil || p.ExecCPUAffinity != nil ||
		p.NoNewPrivileges {
		return errors.New("process: only env and rlimits may be set; the helper builds the rest")
	}
	seen := map[string]bool{}
	for _, kv := range p.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !IsEnvName(name) {
			return fmt.Errorf("process.env entry %q: want NAME=value with NAME matching [A-Za-z_][A-Za-z0-9_]*", truncate(kv))
		}
		if strings.ContainsRune(kv, 0) {
			return fmt.Errorf("process.env %s contains a NUL byte", name)
		}
		if seen[name] {
			return fmt.Errorf("process.env %s given twice", name)
		}
		seen[name] = true
	}
	for _, rl := range p.Rlimits {
		if !AllowedRlimits[rl.Type] {
			return fmt.Errorf("process.rlimits: %s may not be set", rl.Type)
		}
		if rl.Soft > rl.Hard {
			return fmt.Errorf("process.rlimits: %s soft %d above hard %d", rl.Type, rl.Soft, rl.Hard)
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Report is one JSON line the helper writes on FDReport for each step it
// finishes or fails. The supervisor turns each into an audit record, its
// facts relayed byte for byte. Facts is the step's typed facts (package
// audit/facts) as JSON; ParseReport decodes them.
type Report struct {
	Step  string          `json:"step"`
	OK    bool            `json:"ok"`
	Error string          `json:"error,omitempty"`
	Fix   string          `json:"fix,omitempty"`
	Facts json.RawMessage `json:"facts,omitempty"`
}

// ParseReport decodes one report line strictly: at most facts.MaxReport
// bytes, no unknown field in the envelope or in the facts, a helper step,
// and on an ok report every fact the step requires. It returns the report
// and its typed facts; the launcher takes the attestation from the exec
// step's (*facts.Exec).Attestation.
func ParseReport(line []byte) (Report, facts.Helper, error) {
	var r Report
	if len(line) > facts.MaxReport {
		return r, nil, fmt.Errorf("helper report of %d bytes, above the %d-byte bound", len(line), facts.MaxReport)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return r, nil, fmt.Errorf("undecodable helper report: %w", err)
	}
	if dec.More() {
		return r, nil, errors.New("undecodable helper report: data after the JSON object")
	}
	f, err := facts.Decode(r.Step, r.OK, r.Facts)
	if err != nil {
		return r, nil, fmt.Errorf("helper report: %w", err)
	}
	h, ok := f.(facts.Helper)
	if !ok {
		return r, nil, fmt.Errorf("helper report: step %q is not a helper step", r.Step)
	}
	return r, h, nil
}

// Exit statuses of sandboxd-nsinit when it fails before exec'ing bwrap. Each
// step has its own, so the supervisor and an operator can tell them apart
// even without the report pipe. Statuses below 100 belong to bwrap and the
// payload.
const (
	ExitUsage   = 100 // wrong fds or arguments
	ExitConfig  = 101 // the helper's own config is unreadable or invalid
	ExitSpec    = 102 // the launch spec was refused
	ExitEnter   = 103 // user namespace creation or uid/gid maps failed
	ExitNetwork = 104 // network namespace set-up or verification failed
	ExitSeccomp = 105 // the payload profile could not be loaded or compiled
	ExitDrop    = 106 // dropping capabilities or setting no_new_privs failed
	ExitExec    = 107 // bwrap could not be exec'd (missing, not executable)
	// ExitEnvironment: the named environment is unknown to the helper, or
	// its tree is not as registered (changed after registration).
	ExitEnvironment = 108
)

// Unavailable reports whether a helper exit status means "the host cannot
// sandbox right now" (503) rather than a bug or a refused spec.
func Unavailable(status int) bool {
	switch status {
	case ExitConfig, ExitEnter, ExitNetwork, ExitSeccomp, ExitDrop, ExitExec, ExitEnvironment:
		return true
	}
	return false
}
