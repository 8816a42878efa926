package runners

import (
	_ "embed"
	"encoding/binary"
	"fmt"
	"sort"

	"github.com/sandboxd/sandboxd/errdefs"
)

//go:embed python_runner.py
var pythonRunner string

//go:embed javascript_runner.js
var javascriptRunner string

// ModeEnv is the environment variable that selects a runner's mode: "kernel"
// (the default: serve execute requests until shutdown or EOF) or "once" (run
// the first execute, then exit with its exit code: process mode). The
// runners remove it from their environment before running caller code.
const ModeEnv = "SANDBOXD_KERNEL_MODE"

// Modes for ModeEnv.
const (
	ModeKernel = "kernel"
	ModeOnce   = "once"
)

// Source returns the runner program for language ("python" or
// "javascript"), to be run as the payload's code.
func Source(language string) (string, error) {
	switch language {
	case "python":
		return pythonRunner, nil
	case "javascript":
		return javascriptRunner, nil
	}
	return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("no kernel runner for language %q", language), "", nil)
}

//go:embed python_warm.py
var pythonWarm string

//go:embed javascript_warm.js
var javascriptWarm string

// WarmSource returns the warm stub for language ("python" or
// "javascript"): the code of a warm pool sandbox, which waits for one
// request header on stdin and then runs that request's code as a cold
// launch would, with the payload's own stdio (never framed).
func WarmSource(language string) (string, error) {
	switch language {
	case "python":
		return pythonWarm, nil
	case "javascript":
		return javascriptWarm, nil
	}
	return "", errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("no warm stub for language %q", language), "", nil)
}

// WarmHeader is the request header a warm stub reads from its stdin: a
// 4-byte big-endian length, then fields, each a 4-byte big-endian length
// and its bytes: the code, then NAME=value entries of env in sorted order.
// The exec's stdin follows it on the same pipe.
func WarmHeader(code string, env map[string]string) []byte {
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	fields := make([][]byte, 0, len(names)+1)
	fields = append(fields, []byte(code))
	for _, k := range names {
		fields = append(fields, []byte(k+"="+env[k]))
	}
	size := 0
	for _, f := range fields {
		size += 4 + len(f)
	}
	out := binary.BigEndian.AppendUint32(make([]byte, 0, 4+size), uint32(size))
	for _, f := range fields {
		out = binary.BigEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return out
}
