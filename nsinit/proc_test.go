package nsinit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestCapSetsHeld(t *testing.T) {
	const z, full = "0000000000000000", "000001ffffffffff"
	tests := []struct {
		name string
		c    CapSets
		want bool
	}{
		{"all zero", CapSets{Inh: z, Prm: z, Eff: z, Bnd: z, Amb: z}, false},
		{"bounding only", CapSets{Inh: z, Prm: z, Eff: z, Bnd: full, Amb: z}, false},
		{"short zeros", CapSets{Inh: "0", Prm: "00", Eff: "0", Bnd: full, Amb: "0"}, false},
		{"effective", CapSets{Inh: z, Prm: z, Eff: "0000000000200000", Bnd: z, Amb: z}, true},
		{"permitted", CapSets{Inh: z, Prm: "0000000000000001", Eff: z, Bnd: z, Amb: z}, true},
		{"inheritable", CapSets{Inh: "0000000000001000", Prm: z, Eff: z, Bnd: z, Amb: z}, true},
		{"ambient", CapSets{Inh: z, Prm: z, Eff: z, Bnd: z, Amb: "0000000000000400"}, true},
		{"root", CapSets{Inh: z, Prm: full, Eff: full, Bnd: full, Amb: z}, true},
		{"high bit", CapSets{Inh: z, Prm: z, Eff: "8000000000000000", Bnd: z, Amb: z}, true},
		{"uppercase hex", CapSets{Inh: z, Prm: z, Eff: "000000000000000F", Bnd: z, Amb: z}, true},
	}
	for _, tc := range tests {
		if got := tc.c.Held(); got != tc.want {
			t.Errorf("%s: %+v.Held() = %v, want %v", tc.name, tc.c, got, tc.want)
		}
	}
}

func TestReadCapSets(t *testing.T) {
	const z, full = "0000000000000000", "000001ffffffffff"
	tests := []struct {
		file     string
		want     CapSets
		wantHeld bool
		wantErr  string
	}{
		{file: "status-payload", want: CapSets{z, z, z, z, z}},
		{file: "status-bounding-only", want: CapSets{Inh: z, Prm: z, Eff: z, Bnd: full, Amb: z}},
		{file: "status-root", want: CapSets{Inh: z, Prm: full, Eff: full, Bnd: full, Amb: z}, wantHeld: true},
		{file: "status-effective-only", want: CapSets{Inh: z, Prm: z, Eff: "0000000000200000", Bnd: z, Amb: z}, wantHeld: true},
		{file: "status-permitted-only", want: CapSets{Inh: z, Prm: "0000000000200000", Eff: z, Bnd: z, Amb: z}, wantHeld: true},
		{file: "status-inheritable-only", want: CapSets{Inh: "0000000000001000", Prm: z, Eff: z, Bnd: z, Amb: z}, wantHeld: true},
		{file: "status-ambient-only", want: CapSets{Inh: z, Prm: z, Eff: z, Bnd: full, Amb: "0000000000000400"}, wantHeld: true},
		// Lines without a colon are skipped, values are trimmed, keys matched exactly.
		{file: "status-odd-spacing", want: CapSets{Prm: "0000000000000001", Eff: z}, wantHeld: true},
		{file: "status-no-caps", wantErr: "no capability lines"},
		{file: "status-no-effective", wantErr: "no capability lines"},
		{file: "does-not-exist", wantErr: "open"},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			got, err := ReadCapSets(filepath.Join("testdata", tc.file))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("ReadCapSets = %+v, want %+v", got, tc.want)
			}
			if got.Held() != tc.wantHeld {
				t.Fatalf("Held() = %v, want %v", got.Held(), tc.wantHeld)
			}
		})
	}
}

func TestReadCapSetsLive(t *testing.T) {
	c, err := ReadCapSets("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range map[string]string{"inh": c.Inh, "prm": c.Prm, "eff": c.Eff, "bnd": c.Bnd, "amb": c.Amb} {
		if len(v) != 16 {
			t.Errorf("Cap%s = %q, want 16 hex digits", name, v)
		}
		if _, err := strconv.ParseUint(v, 16, 64); err != nil {
			t.Errorf("Cap%s = %q: %v", name, v, err)
		}
	}
}

func TestThreadCaps(t *testing.T) {
	threads, err := ThreadCaps()
	if err != nil {
		t.Fatal(err)
	}
	leader, ok := threads[strconv.Itoa(os.Getpid())]
	if !ok {
		t.Fatalf("ThreadCaps has no entry for the leader %d: %v", os.Getpid(), threads)
	}
	if leader.Eff == "" {
		t.Fatalf("leader caps empty: %+v", leader)
	}
	entries, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	// Threads come and go; every reported tid was a thread of this process.
	if len(threads) == 0 || len(threads) > len(entries)+8 {
		t.Fatalf("%d threads reported, /proc/self/task has %d", len(threads), len(entries))
	}
	for tid := range threads {
		if _, err := strconv.Atoi(tid); err != nil {
			t.Errorf("thread key %q is not a tid", tid)
		}
	}
}

func TestNsInode(t *testing.T) {
	if nsInode("/proc/self/ns/user") == 0 {
		t.Error("nsInode of the own user namespace is 0")
	}
	if nsInode("/proc/self/ns/user") != nsInode("/proc/thread-self/ns/user") {
		t.Error("the process and its thread are in different user namespaces")
	}
	if nsInode("/nonexistent") != 0 {
		t.Error("nsInode of a missing path is not 0")
	}
}
