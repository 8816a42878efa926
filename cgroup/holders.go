package cgroup

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/internal/procstatus"
)

// holdersError is the sweep's error for the exec cgroup name that still
// holds pids after it killed what it could, naming them and the fix. On
// cgroup v1 nothing kills a cgroup whole (there is no cgroup.kill): a
// process the service uid may not signal -- one of the namespace owner's,
// which only a fault in the helper's clean-up could leave -- keeps the
// cgroup, and only root can end it. The rmdir's "device or resource busy"
// alone told an operator none of that.
func holdersError(name, procRoot string, pids []int) error {
	ids := make([]string, len(pids))
	for i, p := range pids {
		ids[i] = strconv.Itoa(p)
	}
	return fmt.Errorf("exec cgroup %s still holds %s, which the service uid could not kill; as root: kill -KILL %s, then restart sandboxd",
		name, describeHolders(procRoot, pids), strings.Join(ids, " "))
}

// describeHolders lists pids as "pid (command, uid N)", from procRoot's
// status files; a process already gone reads as such.
func describeHolders(procRoot string, pids []int) string {
	parts := make([]string, 0, len(pids))
	for _, pid := range pids {
		name, uid := "gone", ""
		if b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "status")); err == nil {
			name, _ = procstatus.Field(b, "Name")
			uid, _ = procstatus.Field(b, "Uid")
			if f := strings.Fields(uid); len(f) > 0 {
				uid = f[0] // the real uid
			}
		}
		if uid != "" {
			parts = append(parts, fmt.Sprintf("%d (%s, uid %s)", pid, name, uid))
		} else {
			parts = append(parts, fmt.Sprintf("%d (%s)", pid, name))
		}
	}
	return "pid " + strings.Join(parts, ", pid ")
}
