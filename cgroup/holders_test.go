package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestHoldersError: a cgroup that could not be removed names the
// processes in it, their commands and uids, and the command that ends
// them; a process gone meanwhile reads as gone; no process, the error as is.
func TestHoldersError(t *testing.T) {
	proc := t.TempDir()
	for pid, status := range map[string]string{
		"23262": "Name:\tbwrap\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t995\t995\t995\t995\nGid:\t995\t995\t995\t995\n",
		"23300": "Name:\tpython3\nUid:\t999\t999\t999\t999\n",
	} {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, pid, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	busy := &os.PathError{Op: "rmdir", Path: "/sys/fs/cgroup/pids/sandboxd/x", Err: syscall.EBUSY}
	for _, tc := range []struct {
		name string
		pids []int
		want string
	}{
		{"an owner's bwrap", []int{23262}, "rmdir /sys/fs/cgroup/pids/sandboxd/x: device or resource busy: still holds pid 23262 (bwrap, uid 995), which the service uid could not kill; as root: kill -KILL 23262, then restart sandboxd"},
		{"two, one gone", []int{23300, 4}, "rmdir /sys/fs/cgroup/pids/sandboxd/x: device or resource busy: still holds pid 23300 (python3, uid 999), pid 4 (gone), which the service uid could not kill; as root: kill -KILL 23300 4, then restart sandboxd"},
		{"empty", nil, "rmdir /sys/fs/cgroup/pids/sandboxd/x: device or resource busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := holdersError(busy, proc, tc.pids)
			if err.Error() != tc.want {
				t.Fatalf("got  %s\nwant %s", err, tc.want)
			}
			if !errors.Is(err, syscall.EBUSY) {
				t.Fatal("the cause is lost")
			}
		})
	}
}
