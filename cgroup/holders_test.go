package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHoldersError: a cgroup the sweep could not empty names the
// processes in it, their commands and uids, and the command that ends
// them; a process gone meanwhile reads as gone.
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
	for _, tc := range []struct {
		name string
		pids []int
		want string
	}{
		{"an owner's bwrap", []int{23262}, "exec cgroup d77f still holds pid 23262 (bwrap, uid 995), which the service uid could not kill; as root: kill -KILL 23262, then restart sandboxd"},
		{"two, one gone", []int{23300, 4}, "exec cgroup d77f still holds pid 23300 (python3, uid 999), pid 4 (gone), which the service uid could not kill; as root: kill -KILL 23300 4, then restart sandboxd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := holdersError("d77f", proc, tc.pids); err.Error() != tc.want {
				t.Fatalf("got  %s\nwant %s", err, tc.want)
			}
		})
	}
}
