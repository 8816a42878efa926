// Package keepertest exposes the keeper's end of the life pipe (keeper.h)
// to Go tests without linking the privileged constructor of package
// prelude. It is imported only by its own tests.
//
// It must never be imported by a program.
package keepertest

/*
#cgo CFLAGS: -Wall -Wextra -Werror
#include "../keeper.h"
*/
import "C"

// Clean is SBX_LIFE_CLEAN, the byte the helper writes on a clean end.
const Clean = byte(C.SBX_LIFE_CLEAN)

// AwaitLifeEnd runs sbx_await_life_end on fd: true means the keeper skips
// its scan of the namespace.
func AwaitLifeEnd(fd int) bool { return C.sbx_await_life_end(C.int(fd)) == 1 }
