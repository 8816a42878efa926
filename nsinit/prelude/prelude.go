// Package prelude is the privileged C prelude of sandboxd-nsinit and its Go
// view. Importing it (only cmd/sandboxd-nsinit does) links an ELF constructor
// that runs before the Go runtime: it makes the sandbox's network and user
// namespaces with the helper's permitted file capabilities, raising each
// only around the call that needs it, and drops and verifies the drop of
// every capability before any Go code runs. See prelude.c for the exact order.
//
// It must never be imported by the supervisor, the CLI or a test binary that
// is not meant to create namespaces at start-up.
package prelude

/*
#cgo CFLAGS: -Wall -Wextra -Werror
#include "prelude.h"
static const char *sbx_owner(void) { return sbx_owner_path; }
*/
import "C"

import (
	"syscall"

	"github.com/sandboxd/sandboxd/nsinit"
)

// OwnerPath is the namespace-owner file compiled into the prelude
// (SBX_OWNER_PATH, from the Makefile's NSINIT_OWNER).
func OwnerPath() string { return C.GoString(C.sbx_owner()) }

// Result returns the prelude's outcome.
func Result() nsinit.PreludeOutcome {
	r := &C.sbx_prelude_result
	return nsinit.PreludeOutcome{
		RUID:       int(r.ruid),
		RGID:       int(r.rgid),
		EUID:       int(r.euid),
		EGID:       int(r.egid),
		OwnerUID:   int(r.owner_uid),
		OwnerGID:   int(r.owner_gid),
		OwnerPath:  OwnerPath(),
		HolderPID:  int(r.holder_pid),
		KeeperPID:  int(r.keeper_pid),
		UsernsFD:   int(r.userns_fd),
		LifeFD:     int(r.life_fd),
		UIDMap:     C.GoString(&r.uid_map[0]),
		GIDMap:     C.GoString(&r.gid_map[0]),
		FailedStep: C.GoString(&r.failed_step[0]),
		Reason:     nsinit.PreludeReason(r.reason),
		Message:    C.GoString(&r.message[0]),
		Errno:      syscall.Errno(r.err),
		StartedNS:  int64(r.started_ns),
		FinishedNS: int64(r.finished_ns),
		CapsNS:     int64(r.caps_ns),
	}
}
