package runners

import (
	_ "embed"
	"fmt"

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
