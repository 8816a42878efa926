// Package prelude is the privileged C prelude of sandboxd-nsinit and its Go
// view. Importing it (only cmd/sandboxd-nsinit does) links an ELF constructor
// that runs before the Go runtime: it makes the sandbox's network and user
// namespaces with the helper's file capabilities and drops every capability
// before any Go code runs. See prelude.c for the exact order.
//
// It must never be imported by the supervisor, the CLI or a test binary that
// is not meant to create namespaces at start-up.
package prelude

/*
#include "prelude.h"
*/
import "C"

import (
	"fmt"
	"syscall"
)

// Outcome is what the prelude did, read once by the helper's Go code.
type Outcome struct {
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
func (o Outcome) Err() error {
	if o.FailedStep == "" {
		return nil
	}
	return fmt.Errorf("%s: %w", o.Message, o.Errno)
}

// Result returns the prelude's outcome.
func Result() Outcome {
	r := &C.sbx_prelude_result
	return Outcome{
		EUID:        int(r.euid),
		EGID:        int(r.egid),
		HolderPID:   int(r.holder_pid),
		UsernsFD:    int(r.userns_fd),
		CapsDropped: r.caps_dropped != 0,
		UIDMap:      C.GoString(&r.uid_map[0]),
		GIDMap:      C.GoString(&r.gid_map[0]),
		FailedStep:  C.GoString(&r.failed_step[0]),
		Message:     C.GoString(&r.message[0]),
		Errno:       syscall.Errno(r.err),
		StartedNS:   int64(r.started_ns),
		FinishedNS:  int64(r.finished_ns),
	}
}
