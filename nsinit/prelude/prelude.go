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
	"syscall"

	"github.com/sandboxd/sandboxd/nsinit"
)

// Result returns the prelude's outcome.
func Result() nsinit.PreludeOutcome {
	r := &C.sbx_prelude_result
	return nsinit.PreludeOutcome{
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
