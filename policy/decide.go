package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

// ErrInvalid marks an error as the caller's: a request value outside what the
// policy accepts. It is errdefs' class: the API layer answers it with 400
// invalid_argument and the error's text as the message, so that text is
// written for the caller.
var ErrInvalid = errdefs.ErrInvalid

// invalidError keeps the message free of an "invalid argument:" prefix (the
// API already says that in its error code) while still matching ErrInvalid.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return e.msg }
func (e *invalidError) Unwrap() error { return errdefs.ErrInvalid }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// Request bounds that are part of the API, not operator settings.
const (
	MaxEnvNames         = 64
	MaxEnvValueBytes    = 32 << 10
	MaxEnvNameBytes     = 256
	MaxPathBytes        = 4096
	maxPathElemBytes    = 255 // NAME_MAX
	MaxFiles            = 1000
	MaxArtifactPatterns = 64
)

// NetworkNone is the only network mode: a namespace with loopback only.
const NetworkNone = api.NetworkNone

// ClampTimeout returns the timeout an exec runs with. nil means the operator's
// default. A one-shot exec may ask for 1..ExecTimeoutMaxMS, a session exec for
// 1..ExecTimeoutCapMS; anything else is an error, never a silently different
// timeout, because a caller that asked for ten minutes and got one would see
// its work killed for no reason it could tell.
func ClampTimeout(requestedMS *int64, session bool, cfg Config) (int64, error) {
	if requestedMS == nil {
		return cfg.ExecTimeoutMS, nil
	}
	ms := *requestedMS
	max, what := cfg.ExecTimeoutMaxMS, "one-shot execs"
	if session {
		max, what = cfg.ExecTimeoutCapMS, "session execs"
	}
	if ms < 1 {
		return 0, invalid("timeout_ms %d is out of range: must be 1..%d for %s", ms, max, what)
	}
	if ms > max {
		hint := ""
		if !session && cfg.ExecTimeoutCapMS > max {
			hint = fmt.Sprintf("; use a session for up to %d", cfg.ExecTimeoutCapMS)
		}
		return 0, invalid("timeout_ms %d is above the operator cap of %d for %s%s", ms, max, what, hint)
	}
	return ms, nil
}

var envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// refusedEnvPrefixes are names no request may set, even though the request's
// env reaches only the payload (never the helper or bwrap, which get a fixed
// environment).
//
// LD_ (LD_PRELOAD, LD_LIBRARY_PATH, LD_AUDIT, ...) are dynamic loader
// variables: they are defence in depth. Were a later change ever to let
// request env leak into a process that is more privileged than the payload
// (nsinit, bwrap, or bwrap's reaper), a loader variable is how that leak
// becomes code execution, and no legitimate payload needs to set one from
// outside; it can still set them for its own children.
//
// SANDBOXD_ is sandboxd's own configuration namespace: a payload-supplied
// SANDBOXD_SOCKET or SANDBOXD_STATE_DIR would at best confuse and at worst
// redirect any sandboxd tool that ends up running with that environment.
var refusedEnvPrefixes = []string{"LD_", "SANDBOXD_"}

// ValidateEnv checks a request's env: at most MaxEnvNames names, each matching
// [A-Za-z_][A-Za-z0-9_]* (and at most MaxEnvNameBytes long), none starting
// with LD_ or SANDBOXD_, each value at most MaxEnvValueBytes with no NUL
// (which would cut the value short at execve). Names are checked in sorted
// order so the error is the same for the same input.
func ValidateEnv(env map[string]string) error {
	if len(env) > MaxEnvNames {
		return invalid("env has %d names; at most %d are allowed", len(env), MaxEnvNames)
	}
	names := make([]string, 0, len(env))
	for name := range env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if len(name) > MaxEnvNameBytes {
			return invalid("env name %.40q... is %d bytes; at most %d are allowed", name, len(name), MaxEnvNameBytes)
		}
		if !envNameRe.MatchString(name) {
			return invalid("env name %q is not allowed: names must match [A-Za-z_][A-Za-z0-9_]*", name)
		}
		for _, p := range refusedEnvPrefixes {
			if strings.HasPrefix(name, p) {
				return invalid("env name %q is not allowed: names starting with %s are refused", name, p)
			}
		}
		v := env[name]
		if len(v) > MaxEnvValueBytes {
			return invalid("env %s: value is %d bytes; at most %d are allowed", name, len(v), MaxEnvValueBytes)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return invalid("env %s: value contains a NUL byte", name)
		}
	}
	return nil
}

// Runtimes returns the languages sandboxd runs, in the order health reports
// them. Each language's runtime has the same name in the helper's config.
func Runtimes() []string {
	return []string{api.LanguagePython, api.LanguageJavaScript, api.LanguageShell}
}

// Runtime maps a request's language to the runtime that runs it.
func Runtime(language string) (string, error) {
	if language == "" {
		return "", invalid("language is required: one of %s", strings.Join(Runtimes(), ", "))
	}
	if !slices.Contains(Runtimes(), language) {
		return "", invalid("language %q is not supported: want one of %s", language, strings.Join(Runtimes(), ", "))
	}
	return language, nil
}

// NetworkEgress: loopback only, plus the operator's allowlist proxy.
const NetworkEgress = api.NetworkEgress

// Network checks a request's network mode shape; empty means NetworkNone.
// Whether the caller may have egress is DecideNetwork's question.
func Network(mode string) (string, error) {
	switch mode {
	case "", NetworkNone:
		return NetworkNone, nil
	case NetworkEgress:
		return NetworkEgress, nil
	}
	return "", invalid("network %q is not supported: want %q or %q", mode, NetworkNone, NetworkEgress)
}

// EgressPermitted reports whether caller may ask for network "egress":
// its uid is in --egress-allow-uid, or, for an API-key caller, its key is
// marked egress in the keys file. This is the one place a caller's egress
// permission is decided. A key caller's uid (-1) is never in the list.
func EgressPermitted(caller Caller, cfg Config) bool {
	if caller.Key != "" {
		return caller.Egress
	}
	return slices.Contains(cfg.EgressAllowUIDs, caller.UID)
}

// DecideNetwork checks the mode and, for egress, that the operator
// enabled it and allows this caller: otherwise 403 forbidden, because the
// request is well-formed but not this caller's to make.
func DecideNetwork(mode string, caller Caller, cfg Config) (string, error) {
	network, err := Network(mode)
	if err != nil || network != NetworkEgress {
		return network, err
	}
	if cfg.EgressAllow == "" {
		return "", errdefs.New(errdefs.ErrForbidden, "network \"egress\" is not enabled on this supervisor (the operator set no --egress-allow)", "", nil)
	}
	if !EgressPermitted(caller, cfg) {
		return "", errdefs.New(errdefs.ErrForbidden, fmt.Sprintf("caller uid %d may not use network \"egress\" (not in --egress-allow-uid)", caller.UID), "", nil)
	}
	return network, nil
}

// ValidateWorkspacePath checks a path relative to /workspace as given by a
// request (a staged file, a file API path, an artifact pattern). It is a
// lexical check only: the component that touches the disk must still resolve
// it beneath the workspace (package workspace, with openat2
// RESOLVE_BENEATH), because a symlink the payload planted is invisible here.
//
// Refused: empty, longer than MaxPathBytes, a component longer than 255
// bytes, NUL or other control characters (they end strings early or forge
// lines in logs), a backslash (never a separator on Linux, but a separator to
// anyone who reads the path on Windows and an escape character to glob), an
// absolute path, a ".." component, and anything not in clean form ("a//b",
// "./a", "a/", "."), so that one file has exactly one spelling.
func ValidateWorkspacePath(p string) error {
	if p == "" {
		return invalid("path is empty")
	}
	if len(p) > MaxPathBytes {
		return invalid("path is %d bytes; at most %d are allowed", len(p), MaxPathBytes)
	}
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == 0:
			return invalid("path %q contains a NUL byte", p)
		case c < 0x20 || c == 0x7f:
			return invalid("path %q contains a control character", p)
		case c == '\\':
			return invalid("path %q contains a backslash", p)
		}
	}
	if strings.HasPrefix(p, "/") {
		return invalid("path %q is absolute; paths are relative to /workspace", p)
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return invalid("path %q has a \"..\" component; paths must stay inside /workspace", p)
		}
		if len(elem) > maxPathElemBytes {
			return invalid("path %q has a component of %d bytes; at most %d are allowed", p, len(elem), maxPathElemBytes)
		}
	}
	if p == "." {
		return invalid("path %q names the workspace itself, not a file in it", p)
	}
	if c := path.Clean(p); c != p {
		return invalid("path %q is not in clean form (want %q)", p, c)
	}
	return nil
}

// ValidateArtifactPattern checks an artifact glob: a workspace path (see
// ValidateWorkspacePath) with valid path.Match syntax. Backslash escapes are
// not available because backslashes are refused in paths.
func ValidateArtifactPattern(pattern string) error {
	if err := ValidateWorkspacePath(pattern); err != nil {
		return err
	}
	if _, err := path.Match(pattern, ""); err != nil {
		return invalid("artifact pattern %q is not a valid glob: %v", pattern, err)
	}
	return nil
}

// HasRunner reports whether a language runs through a runner (kernel mode,
// entrypoints, displays, exceptions): python and javascript, not shell.
func HasRunner(language string) bool {
	return language == api.LanguagePython || language == api.LanguageJavaScript
}

// Mode decides an exec's mode: "" is kernel in a session for a language
// with a runner, process otherwise (one-shot, process mode keeps its exact
// semantics as the default); kernel is refused for shell (a persistent
// shell is not offered). A one-shot kernel exec runs in a throwaway kernel.
func Mode(mode, runtime string, session bool) (string, error) {
	switch mode {
	case "":
		if session && HasRunner(runtime) {
			return api.ModeKernel, nil
		}
		return api.ModeProcess, nil
	case api.ModeProcess:
		return mode, nil
	case api.ModeKernel:
		if !HasRunner(runtime) {
			return "", invalid("mode %q is not available for language %q: use mode %q", mode, runtime, api.ModeProcess)
		}
		return mode, nil
	}
	return "", invalid("mode %q is not supported: want %q or %q", mode, api.ModeKernel, api.ModeProcess)
}

// MaxEntrypointBytes bounds an entrypoint's name.
const MaxEntrypointBytes = 64

var entrypointRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Entrypoint checks entrypoint and inputs: an ASCII identifier of at most
// 64 bytes (valid in Python and JavaScript); inputs, when not absent or
// null, one JSON object and only with an entrypoint; neither for shell.
func Entrypoint(entrypoint string, inputs []byte, runtime string) (json.RawMessage, error) {
	in := bytes.TrimSpace(inputs)
	if len(in) == 0 || string(in) == "null" {
		in = nil
	}
	if (entrypoint != "" || in != nil) && !HasRunner(runtime) {
		return nil, invalid("entrypoint and inputs are not available for language %q", runtime)
	}
	if entrypoint != "" && (len(entrypoint) > MaxEntrypointBytes || !entrypointRe.MatchString(entrypoint)) {
		return nil, invalid("entrypoint %.80q is not an identifier ([A-Za-z_][A-Za-z0-9_]*, at most %d bytes)", entrypoint, MaxEntrypointBytes)
	}
	if in == nil {
		return nil, nil
	}
	if entrypoint == "" {
		return nil, invalid("inputs need an entrypoint")
	}
	if in[0] != '{' {
		return nil, invalid("inputs must be a JSON object")
	}
	return json.RawMessage(in), nil
}
