//go:build bench

package integration

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/archive/archivetest"
)

// rssKiB reads VmRSS or VmHWM (kB) of pid.
func rssKiB(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return n
		}
	}
	return -1
}

// TestArchiveS3Figures (make bench): a keyed session holding 200 MiB is
// archived to the real S3 server by a delete; it prints the throughput
// (archive bytes / delete time, spool and upload included) and the
// supervisor's RSS before and, sampled every 5 ms, during the archive, and
// fails if the peak grows by more than 64 MiB (archives are streamed,
// never held in memory).
func TestArchiveS3Figures(t *testing.T) {
	in := setup(t)
	srv := archivetest.Start(t)
	flags := append(s3Flags(t, in, srv, "bench-"+randID()+"/"), "--archive-max-bytes", "256MiB", "--s3-timeout", "5m")
	s := in.startSupervisor(t, supervisorOpts{extra: flags})
	pid := s.cmd.Process.Pid
	for _, size := range []int{200} {
		key := "bench-" + randID()
		a := s.createSession(t, map[string]any{"key": key})
		r := s.sessionExec(t, a.ID, py(fmt.Sprintf("import os\nwith open('big.bin','wb') as f:\n    for i in range(%d): f.write(os.urandom(1<<20))\nprint('ok')", size)))
		if r.Stdout != "ok\n" {
			t.Fatalf("write: %+v", r)
		}
		time.Sleep(200 * time.Millisecond)
		before := rssKiB(pid, "VmRSS")
		var peak atomic.Int64
		stop := make(chan struct{})
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
					if v := rssKiB(pid, "VmRSS"); v > peak.Load() {
						peak.Store(v)
					}
				}
			}
		}()
		start := time.Now()
		if st, b := s.do("DELETE", "/v1/sessions/"+a.ID, nil); st != 204 {
			t.Fatalf("delete: %d %s", st, b)
		}
		took := time.Since(start)
		close(stop)
		var bytes float64
		for _, rec := range s.auditRecords() {
			if rec["step"] == "session.archive" && rec["ok"] == true {
				if f, ok := rec["facts"].(map[string]any); ok {
					bytes, _ = f["bytes"].(float64)
				}
			}
		}
		if bytes < float64(size<<20) {
			t.Fatalf("archive not stored (%v bytes):\n%s", bytes, s.logs)
		}
		t.Logf("archived %d MiB workspace (%.1f MiB tar) to S3 in %v: %.1f MB/s; supervisor RSS %d KiB before, peak %d KiB during (+%d KiB)",
			size, bytes/(1<<20), took.Round(time.Millisecond), bytes/1e6/took.Seconds(), before, peak.Load(), peak.Load()-before)
		if peak.Load()-before > 64<<10 {
			t.Errorf("RSS grew by %d KiB while archiving: archives must be streamed", peak.Load()-before)
		}
		// And back: the restore, timed.
		start = time.Now()
		b := s.createSession(t, map[string]any{"key": key})
		took = time.Since(start)
		t.Logf("restored it from S3 (download, verify, unpack) in %v: %.1f MB/s", took.Round(time.Millisecond), bytes/1e6/took.Seconds())
		if !b.Restored {
			t.Fatal("not restored")
		}
		s.do("DELETE", "/v1/sessions/"+b.ID, nil)
	}
}
