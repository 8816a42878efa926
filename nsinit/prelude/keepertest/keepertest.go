// Package keepertest exposes the keeper's end of the life pipe (keeper.h)
// to Go tests without linking the privileged constructor of package
// prelude. It is imported only by tests.
//
// It must never be imported by a program.
package keepertest

/*
#cgo CFLAGS: -Wall -Wextra -Werror
#include "../keeper.h"
*/
import "C"

// The bytes the helper writes on a deliberate end (SBX_LIFE_CLEAN,
// SBX_LIFE_SCAN).
const (
	Clean = byte(C.SBX_LIFE_CLEAN)
	Scan  = byte(C.SBX_LIFE_SCAN)
)

// End is how the keeper read the life pipe's end.
type End int

// The ends of enum sbx_life_end.
const (
	EndClean End = C.SBX_LIFE_END_CLEAN // no scan
	EndScan  End = C.SBX_LIFE_END_SCAN  // scan now
	EndLost  End = C.SBX_LIFE_END_LOST  // wait for the helper to be gone, then scan
)

func (e End) String() string {
	switch e {
	case EndClean:
		return "clean"
	case EndScan:
		return "scan"
	case EndLost:
		return "lost"
	}
	return "unknown"
}

// AwaitLifeEnd runs sbx_await_life_end on fd.
func AwaitLifeEnd(fd int) End { return End(C.sbx_await_life_end(C.int(fd))) }

// AwaitParentGone runs sbx_await_parent_gone: it reports whether the
// calling process's parent, parent, went within limitMS.
func AwaitParentGone(parent, limitMS int) bool {
	return C.sbx_await_parent_gone(C.pid_t(parent), C.int(limitMS)) == 1
}
