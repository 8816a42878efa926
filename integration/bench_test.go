//go:build bench

package integration

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestBench is `make bench`: one-shot execs through the API, interleaved in
// one run with bare python3/node and bare bwrap with the same binds, so the
// noise of this machine hits every column alike. It prints p50/p95 and the
// ratios; it asserts nothing about speed (that is not a test's job).
func TestBench(t *testing.T) {
	in := setup(t)
	var extra []string
	if v := os.Getenv("SANDBOXD_BENCH_FLAGS"); v != "" {
		extra = strings.Fields(v)
	}
	s := in.startSupervisor(t, supervisorOpts{extra: extra})
	// The audit log's fsync policy is part of what is measured: the default
	// (each record) unless SANDBOXD_BENCH_FLAGS says otherwise.
	n := 150
	if v, err := strconv.Atoi(os.Getenv("SANDBOXD_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	cred := &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}}}
	bare := func(argv ...string) func() error {
		return func() error {
			// env -i: this machine exports variables that slow node 2.7x.
			cmd := exec.Command("/usr/bin/env", append([]string{"-i", "PATH=/usr/bin:/bin"}, argv...)...)
			cmd.SysProcAttr = cred
			cmd.Dir = "/"
			out, err := cmd.CombinedOutput()
			if err != nil {
				return fmt.Errorf("%v: %v: %s", argv, err, out)
			}
			return nil
		}
	}
	// The same binds and namespaces the helper asks bwrap for, but bwrap
	// making its own user namespace as an unprivileged user.
	bwrapArgs := func(argv ...string) []string {
		a := []string{"/usr/bin/bwrap", "--unshare-user", "--uid", "1000", "--gid", "1000",
			"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--unshare-cgroup-try",
			"--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"}
		for _, p := range []string{"/usr", "/etc/alternatives", "/etc/ssl", "/etc/localtime"} {
			a = append(a, "--ro-bind-try", p, p)
		}
		a = append(a, "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin", "--symlink", "usr/lib", "/lib",
			"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dir", "/dev")
		for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
			a = append(a, "--dev-bind-try", d, d)
		}
		a = append(a, "--size", "268435456", "--tmpfs", "/tmp", "--size", "67108864", "--tmpfs", "/dev/shm",
			"--tmpfs", "/workspace", "--remount-ro", "/", "--chdir", "/workspace", "--")
		return append(a, argv...)
	}
	api := func(lang, code string) func() error {
		return func() error {
			r := s.exec(map[string]any{"language": lang, "code": code})
			if r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "1\n" {
				return fmt.Errorf("api %s: %+v", lang, r)
			}
			return nil
		}
	}
	sess := s.createSession(t, map[string]any{"ttl_seconds": 3600})
	t.Cleanup(func() { in.dropSession(sess.ID) })
	// mode "process": a fresh interpreter in the session's workspace;
	// "kernel": the session's warm kernel (issue 11's kernel row).
	sessionAPI := func(lang, code, mode string) func() error {
		return func() error {
			r := s.sessionExec(t, sess.ID, map[string]any{"language": lang, "code": code, "mode": mode})
			if r.ExitCode == nil || *r.ExitCode != 0 || r.Stdout != "1\n" {
				return fmt.Errorf("session api %s: %+v", lang, r)
			}
			return nil
		}
	}
	rows := []struct {
		lang string
		cols []struct {
			name string
			fn   func() error
		}
	}{
		{"python print(1)", []struct {
			name string
			fn   func() error
		}{
			{"api one-shot", api("python", "print(1)")},
			{"bare python3", bare("/usr/bin/python3", "-c", "print(1)")},
			{"bare bwrap", bare(bwrapArgs("/usr/bin/python3", "-c", "print(1)")...)},
			{"api session", sessionAPI("python", "print(1)", "process")},
			{"api kernel", sessionAPI("python", "print(1)", "kernel")},
		}},
		{"node console.log(1)", []struct {
			name string
			fn   func() error
		}{
			{"api one-shot", api("javascript", "console.log(1)")},
			{"bare node", bare("/usr/bin/node", "-e", "console.log(1)")},
			{"bare bwrap", bare(bwrapArgs("/usr/bin/node", "-e", "console.log(1)")...)},
			{"api session", sessionAPI("javascript", "console.log(1)", "process")},
			{"api kernel", sessionAPI("javascript", "console.log(1)", "kernel")},
		}},
	}
	fmt.Printf("\nsandboxd bench: %d interleaved runs per column, %s\n", n, time.Now().Format(time.RFC3339))
	for _, row := range rows {
		samples := make([][]time.Duration, len(row.cols))
		for i := 0; i < n+5; i++ {
			for c, col := range row.cols {
				start := time.Now()
				if err := col.fn(); err != nil {
					t.Fatal(err)
				}
				if i >= 5 { // warm-up
					samples[c] = append(samples[c], time.Since(start))
				}
			}
		}
		p := func(d []time.Duration, q float64) time.Duration {
			s := append([]time.Duration(nil), d...)
			sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
			return s[int(q*float64(len(s)-1))]
		}
		fmt.Printf("\n%s\n  %-14s %9s %9s\n", row.lang, "", "p50", "p95")
		for c, col := range row.cols {
			fmt.Printf("  %-14s %9s %9s\n", col.name, ms(p(samples[c], 0.5)), ms(p(samples[c], 0.95)))
		}
		apiP50, bareP50, bwrapP50 := p(samples[0], 0.5), p(samples[1], 0.5), p(samples[2], 0.5)
		fmt.Printf("  ratio p50: api/bare-bwrap %.2f   api/bare %.2f   bare-bwrap/bare %.2f   (target api/bare-bwrap <= 1.20)\n",
			ratio(apiP50, bwrapP50), ratio(apiP50, bareP50), ratio(bwrapP50, bareP50))
		fmt.Printf("  ratio p95: api/bare-bwrap %.2f\n", ratio(p(samples[0], 0.95), p(samples[2], 0.95)))
		fmt.Printf("  session row p50: api-session/bare-bwrap %.2f   api-session/bare %.2f   p95 api-session/bare-bwrap %.2f\n",
			ratio(p(samples[3], 0.5), bwrapP50), ratio(p(samples[3], 0.5), bareP50), ratio(p(samples[3], 0.95), p(samples[2], 0.95)))
		fmt.Printf("  kernel row p50: api-kernel %s vs bare %s: api-kernel/bare %.2f   (target <= 0.30)\n",
			ms(p(samples[4], 0.5)), ms(bareP50), ratio(p(samples[4], 0.5), bareP50))
	}
	fmt.Println(strings.Repeat("-", 60))
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d.Microseconds())/1000) }

func ratio(a, b time.Duration) float64 { return float64(a) / float64(b) }
