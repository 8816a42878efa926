//go:build bench

package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"golang.org/x/sys/unix"
)

// realExec is the record set of one successful exec, with facts of the
// sizes a real launch writes (the helper's exec record carries bwrap's
// whole argv): nine records, some 8 KiB in all.
func realExec(id string) []Record {
	argv := make([]string, 0, 120)
	for i := 0; i < 120; i++ {
		argv = append(argv, fmt.Sprintf("--ro-bind-try-%02d", i))
	}
	sha := strings.Repeat("5e", 32)
	caps := "0000000000000000"
	c := func(step, source string, facts map[string]any) Record {
		return Record{ExecID: id, Step: step, Source: source, CallerUID: 1000, CallerGID: 1000, CallerPID: 4321, OK: true, Facts: facts}
	}
	return []Record{
		c(StepAccept, SourceSupervisor, map[string]any{"method": "POST", "path": "/v1/exec", "body_bytes": 45, "content_length": 45}),
		c(StepDecide, SourceSupervisor, map[string]any{"session": false, "runtime": "python", "code_bytes": 8, "code_sha256": sha,
			"file_count": 0, "file_bytes": 0, "env_names": []string{}, "env_values_recorded": false, "artifacts": nil, "network": "none",
			"limits": map[string]any{"timeout_ms": 30000, "output_limit_bytes": 262144, "tmp_size_bytes": 268435456, "memory_bytes": 2147483648, "pids": 256, "cpus": 1, "nofile": 1024, "file_size_bytes": 1073741824}, "stdin_bytes": 0}),
		c(StepPrepare, SourceSupervisor, map[string]any{"workspace": "/var/lib/sandboxd/workspaces/" + id, "workspace_kind": "one-shot", "files": 0, "file_bytes": 0, "stdio": "pipes", "cgroup_mode": "none",
			"limits": map[string]any{"timeout_ms": 30000, "output_limit_bytes": 262144, "tmp_size_bytes": 268435456, "memory_bytes": 0, "pids": 0, "cpus": 0, "nofile": 1024, "file_size_bytes": 1073741824}}),
		c(StepEnter, SourceNsinit, map[string]any{"exec_id": id, "caller_uid": 1000, "runtime": "python", "probe": false, "helper_version": "0.1.0",
			"config": "/etc/sandboxd/nsinit.json", "config_sha256": sha, "euid": 998, "egid": 998, "uid_map": "1000 998 1", "gid_map": "1000 998 1",
			"setgroups": "deny", "holder_pid": 12345, "prelude_us": 210, "userns_inode": 4026532001, "own_userns_inode": 4026531837, "workspace": id, "t_us": 900}),
		c(StepNetwork, SourceNsinit, map[string]any{"mode": "none", "netns_inode": 4026532003, "links": []string{"lo"}, "addrs": []string{"127.0.0.1/8", "::1/128"}, "t_us": 1200}),
		c(StepSeccomp, SourceNsinit, map[string]any{"profile": "/etc/sandboxd/profiles/payload.json", "profile_sha256": sha, "bpf_source": "precompiled /etc/sandboxd/profiles/payload.json.bpf",
			"bpf_instructions": 640, "bpf_sha256": sha, "applied_by": "bwrap --seccomp, immediately before it execs the payload", "t_us": 1500}),
		c(StepDrop, SourceNsinit, map[string]any{"rlimits": map[string]any{"RLIMIT_CORE": 0, "RLIMIT_NOFILE": 1024, "RLIMIT_FSIZE": 1073741824}, "threads_checked": 5,
			"cap_inh": caps, "cap_prm": caps, "cap_eff": caps, "cap_amb": caps, "cap_bnd": "000001ffffffffff", "no_new_privs": 1, "t_us": 1700}),
		c(StepExec, SourceNsinit, map[string]any{"argv": argv, "bwrap_env": []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8", "TMPDIR=/tmp"},
			"payload_env_names": []string{"HOME", "LANG", "PATH", "TMPDIR"}, "mounts_sha256": sha, "profile_sha256": sha, "helper_version": "0.1.0", "code_sha256": sha, "t_us": 1900}),
		c(StepReap, SourceSupervisor, map[string]any{"exit_code": 0, "signal": nil, "timed_out": false, "duration_ms": 41, "usage": map[string]any{"cpu_ms": 30, "max_rss_kb": 9000},
			"bwrap_child_pid": 3, "stdout_bytes": 2, "stderr_bytes": 0, "stdout_truncated": false, "stderr_truncated": false, "pid_namespace_gone": true, "oom_killed": false, "cgroup_processes_left": 0}),
	}
}

var fsNames = map[int64]string{0xEF53: "ext4", 0x01021994: "tmpfs", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x794c7630: "overlayfs", 0x2fc12fc1: "zfs"}

// TestAuditCost is part of `make bench`: what the audit trail costs per
// exec, with fdatasync after every record, at the barriers (the default:
// the launcher's before the release, the reap's before the answer) and
// without, on
// the file system of $SANDBOXD_BENCH_AUDIT_DIR (default: the temp dir;
// point it at the state directory's file system for the real figure).
func TestAuditCost(t *testing.T) {
	dir := os.Getenv("SANDBOXD_BENCH_AUDIT_DIR")
	if dir == "" {
		dir = t.TempDir()
	} else {
		d, err := os.MkdirTemp(dir, "audit-bench-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var st unix.Statfs_t
	_ = unix.Statfs(dir, &st)
	fsName := fsNames[int64(st.Type)]
	if fsName == "" {
		fsName = fmt.Sprintf("fs type %#x", st.Type)
	}
	const n, warm = 300, 10
	recs := len(realExec("x"))
	var bytesPerExec int
	for _, r := range realExec("0123456789abcdef0123456789abcdef") {
		line, _, _ := encodeRecord(r)
		bytesPerExec += len(line)
	}
	type mode struct {
		name string
		o    Options
	}
	modes := []mode{
		{"fsync each record", Options{Fsync: true, SyncEveryRecord: true}},
		{"fsync at barriers", Options{Fsync: true}},
		{"no fsync", Options{}},
	}
	p50 := map[string]time.Duration{}
	figs := map[string]any{"records_per_exec": recs, "bytes_per_exec": bytesPerExec, "fs": fsName}
	fmt.Printf("\naudit trail cost per exec: %d records, %d bytes, in %s (%s)\n", recs, bytesPerExec, dir, fsName)
	for i, m := range modes {
		path := filepath.Join(dir, fmt.Sprintf("audit-%d.log", i))
		w, err := Open(path, m.o)
		if err != nil {
			t.Fatal(err)
		}
		var samples []time.Duration
		var total time.Duration
		syncs0 := w.syncs
		for i := 0; i < n+warm; i++ {
			id := fmt.Sprintf("%032x", i)
			start := time.Now()
			for _, r := range realExec(id) {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
				if r.Step == StepPrepare { // the launcher's barrier before the release
					if err := w.Sync(); err != nil {
						t.Fatal(err)
					}
				}
			}
			if i >= warm {
				samples = append(samples, time.Since(start))
				total += time.Since(start)
			}
		}
		syncs := w.syncs - syncs0
		w.Close()
		sort.Slice(samples, func(a, b int) bool { return samples[a] < samples[b] })
		q := func(f float64) time.Duration { return samples[int(f*float64(len(samples)-1))] }
		p50[m.name] = q(0.5)
		fmt.Printf("  one exec at a time, %-18s p50 %7.3f ms  p95 %7.3f ms  mean %7.3f ms  (%.1f fdatasync per exec)\n", m.name,
			ms(q(0.5)), ms(q(0.95)), ms(total/n), float64(syncs)/float64(n+warm))
		figs[m.name] = map[string]float64{"p50_ms": ms(q(0.5)), "p95_ms": ms(q(0.95)), "mean_ms": ms(total / n),
			"fdatasync_per_exec": float64(syncs) / float64(n+warm)}
	}
	fmt.Printf("  => fdatasync costs %.3f ms per exec at each record, %.3f ms at the barriers (p50)\n",
		ms(p50["fsync each record"]-p50["no fsync"]), ms(p50["fsync at barriers"]-p50["no fsync"]))

	// Concurrent execs share fdatasyncs (group commit).
	const conc = 4
	w, err := Open(filepath.Join(dir, "audit-concurrent.log"), Options{Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	syncs0 := w.syncs
	start := time.Now()
	errs := make(chan error, conc)
	for g := 0; g < conc; g++ {
		go func(g int) {
			for i := 0; i < n/conc; i++ {
				for _, r := range realExec(fmt.Sprintf("%02d%030x", g, i)) {
					if err := w.Write(r); err != nil {
						errs <- err
						return
					}
					if r.Step == StepPrepare {
						if err := w.Sync(); err != nil {
							errs <- err
							return
						}
					}
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < conc; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	el := time.Since(start)
	syncs := w.syncs - syncs0
	w.Close()
	fmt.Printf("  %d execs at once, fsync at barriers: mean %.3f ms of log time per exec; %d fdatasync for %d records (group commit)\n",
		conc, ms(el/time.Duration(n/conc*conc)), syncs, n/conc*conc*recs)
	figs["4 at once, fsync at barriers"] = map[string]float64{"mean_ms": ms(el / time.Duration(n/conc*conc)), "fdatasyncs": float64(syncs)}
	testutil.WriteBenchPart(t, "audit_cost", figs)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
