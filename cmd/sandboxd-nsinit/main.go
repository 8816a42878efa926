// Command sandboxd-nsinit is sandboxd's privileged helper. It carries
// permitted-only file capabilities (cap_setgid, cap_setuid, cap_net_admin,
// cap_sys_admin; never a setuid bit), which only the C prelude linked in by
// package prelude uses, each raised around the one call that needs it,
// before the Go runtime starts. See SECURITY.md and package nsinit for the
// launch order.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/sandboxd/sandboxd/nsinit"
	"github.com/sandboxd/sandboxd/nsinit/prelude"
)

func main() {
	// The helper lives for a few milliseconds and allocates little: a GC
	// cycle would only cost time.
	debug.SetGCPercent(-1)
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(nsinit.Version)
		return
	}
	// Maintenance, run as root by `make install`: compile a profile into
	// the cache launches use. Not a launch: no fds, no namespaces used.
	if len(os.Args) == 3 && os.Args[1] == "--compile-profile" {
		if err := nsinit.WriteBPFCache(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "sandboxd-nsinit:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "sandboxd-nsinit takes no arguments: it is started by sandboxd with the launch spec on fd 3")
		os.Exit(100)
	}
	os.Exit(nsinit.Main(prelude.Result()))
}
