package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

func TestOwnCPULimit(t *testing.T) {
	for _, tc := range []struct {
		name     string
		files    map[string]string // relative to the delegated root's parent
		want     float64
		limitSet bool
	}{
		{"none set", map[string]string{"svc/cpu.max": "max 100000\n"}, 0, false},
		{"own quota", map[string]string{"svc/cpu.max": "150000 100000\n"}, 1.5, true},
		{"an ancestor's is smaller", map[string]string{"svc/cpu.max": "300000 100000\n", "cpu.max": "50000 100000\n"}, 0.5, true},
		{"unreadable", map[string]string{"svc/cpu.max": "garbage\n"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeV2(t, "/slice/svc/"+LeafName, "memory pids cpu", "")
			for rel, content := range tc.files {
				if err := os.WriteFile(filepath.Join(f.mnt, "slice", rel), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, ok := OwnCPULimit(f.host)
			if ok != tc.limitSet || got != tc.want {
				t.Fatalf("OwnCPULimit = %v, %v; want %v, %v", got, ok, tc.want, tc.limitSet)
			}
		})
	}
}
