package nsinit

import (
	"fmt"
	"syscall"
)

// PreludeOutcome is what the C prelude (package prelude) did before the Go
// runtime started, read once by Main. It is a plain struct so that this
// package, and its tests, never link the prelude itself.
type PreludeOutcome struct {
	EUID, EGID  int
	HolderPID   int
	UsernsFD    int // -1 when the user namespace was not made
	CapsDropped bool
	UIDMap      string
	GIDMap      string
	// FailedStep is empty on success, else the launch step that failed
	// ("enter", "network", "drop") with Message and Errno saying why.
	FailedStep string
	Message    string
	Errno      syscall.Errno
	// StartedNS and FinishedNS are CLOCK_MONOTONIC readings around the prelude.
	StartedNS, FinishedNS int64
}

// Err returns the prelude's failure as an error, or nil.
func (o PreludeOutcome) Err() error {
	if o.FailedStep == "" {
		return nil
	}
	return fmt.Errorf("%s: %w", o.Message, o.Errno)
}
