package nsinit

import (
	"fmt"
	"syscall"

	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// PreludeOutcome is what the C prelude (package prelude) did before the Go
// runtime started, read once by Main. It is a plain struct so that this
// package, and its tests, never link the prelude itself.
type PreludeOutcome struct {
	// RUID and RGID are the caller's (the supervisor's service user); EUID
	// and EGID as the helper was started.
	RUID, RGID, EUID, EGID int
	// OwnerUID and OwnerGID own the sandbox's user namespace (read from
	// OwnerPath); -1 when the prelude did not get that far.
	OwnerUID, OwnerGID int
	OwnerPath          string
	HolderPID          int
	KeeperPID          int // the keeper (LifeFD), this process's child
	UsernsFD           int // -1 when the user namespace was not made
	// LifeFD is the write end of the keeper's pipe, held (close-on-exec)
	// until this process exits: the keeper then kills what is left in
	// the user namespace. -1 when not made.
	LifeFD int
	UIDMap string
	GIDMap string
	// FailedStep is empty on success, else the launch step that failed
	// ("enter", "network") with Reason, Message and Errno saying why.
	FailedStep string
	Reason     PreludeReason
	Message    string
	Errno      syscall.Errno
	// StartedNS and FinishedNS are CLOCK_MONOTONIC readings around the
	// prelude; CapsNS is how long, in total, any capability was effective.
	StartedNS, FinishedNS, CapsNS int64
}

// PreludeReason is enum sbx_reason of prelude.h: why the prelude failed.
type PreludeReason int

// preludeReasons names each sbx_reason, in order. The names are what a
// failing report carries in facts["reason"] (see spec.Reason*).
var preludeReasons = []string{
	"", spec.ReasonRoot, spec.ReasonOwnerFile, spec.ReasonOwnerIDs, spec.ReasonSupervisorGone,
	"prctl", "capabilities", "groups", "credentials", "netns", "loopback", spec.ReasonFork,
	spec.ReasonUsernsRefused, spec.ReasonUsernsLimit, "userns", "maps", "userns_fd", "fds",
	"rlimit", "keeper",
}

// String returns the reason's name, as reported in facts["reason"].
func (r PreludeReason) String() string {
	if r >= 0 && int(r) < len(preludeReasons) {
		return preludeReasons[r]
	}
	return fmt.Sprintf("reason_%d", int(r))
}

// Err returns the prelude's failure as an error, or nil.
func (o PreludeOutcome) Err() error {
	if o.FailedStep == "" {
		return nil
	}
	return fmt.Errorf("%s: %w", o.Message, o.Errno)
}
