package integration

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// TestPreludeRlimitNproc: the holder is forked with no capability
// effective, so the service user's RLIMIT_NPROC applies to it (a fork with
// CAP_SYS_ADMIN effective is exempt), and the prelude fails closed with
// reason "fork".
func TestPreludeRlimitNproc(t *testing.T) {
	in := setup(t)
	// The helper itself will be one more task of the user; its fork would
	// be the next, one above the limit.
	limit := tasksOf(in.uid) + 1
	d := in.startDirect(t, directOpts{argvPrefix: []string{"/usr/bin/prlimit", fmt.Sprintf("--nproc=%d:%d", limit, limit), "--"}})
	r := d.report(t, 10*time.Second)
	if r.OK || r.Step != "enter" || r.Facts["reason"] != spec.ReasonFork {
		t.Fatalf("helper at RLIMIT_NPROC %d: report %+v, want a failed enter with reason %q", limit, r, spec.ReasonFork)
	}
	if !strings.Contains(r.Error, fmt.Sprintf("(errno %d)", int(syscall.EAGAIN))) {
		t.Errorf("error %q, want EAGAIN", r.Error)
	}
	<-d.done
	if ws, ok := d.state.Sys().(syscall.WaitStatus); !ok || ws.ExitStatus() != spec.ExitEnter {
		t.Errorf("helper exit %v, want %d", d.state, spec.ExitEnter)
	}
}

// lingeringSocket returns a TCP socket with SO_LINGER 10 s and unsent data
// that its peer never reads: its last close blocks for the linger time.
func lingeringSocket(t *testing.T) *os.File {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	peer, err := ln.Accept() // never read: the window fills, data stays unsent
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { peer.Close() })
	tc := c.(*net.TCPConn)
	_ = tc.SetLinger(10)
	_ = tc.SetWriteBuffer(1 << 16)
	buf := make([]byte, 1<<16)
	for {
		_ = tc.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		if _, err := tc.Write(buf); err != nil {
			break
		}
	}
	f, err := tc.File() // a dup, blocking mode
	if err != nil {
		t.Fatal(err)
	}
	tc.Close()
	return f
}

// TestPreludeLingeringSocket: an inherited socket on fd 7 whose close
// blocks (SO_LINGER with unsent data) does not extend the time the helper
// holds capabilities: the prelude marks it close-on-exec while privileged
// and closes it only after the drop. Read from outside, from /proc, while
// the helper is blocked in that close.
func TestPreludeLingeringSocket(t *testing.T) {
	in := setup(t)
	d := in.startDirect(t, directOpts{extra: []*os.File{lingeringSocket(t)}})
	time.Sleep(1500 * time.Millisecond)
	st, err := statusOf(d.cmd.Process.Pid)
	if err != nil {
		t.Fatalf("the helper is gone already: the close did not block, the test proves nothing: %v", err)
	}
	select {
	case r := <-d.reports:
		t.Fatalf("the helper reported before its close could return: %+v", r)
	default:
	}
	t.Logf("helper blocked in the close of fd 7: State %s CapPrm %s CapEff %s", st["State"], st["CapPrm"], st["CapEff"])
	if !capsZero(st) {
		t.Errorf("while blocked closing the inherited socket the helper holds capabilities: CapPrm %s CapEff %s CapInh %s CapAmb %s",
			st["CapPrm"], st["CapEff"], st["CapInh"], st["CapAmb"])
	}
	d.specW.Close()
	r := d.report(t, 20*time.Second)
	if us, _ := r.Facts["caps_effective_us"].(float64); us > 200000 {
		t.Errorf("capabilities effective for %v us in total", us)
	}
	t.Logf("first report after %v: caps_effective_us %v prelude_us %v", time.Since(d.started), r.Facts["caps_effective_us"], r.Facts["prelude_us"])
}

// TestPreludeSupervisorGone: the supervisor keeps the release pipe's write
// end until it reaps the helper; a hang-up means it died (perhaps before
// PDEATHSIG was armed), and the helper stops -- in the prelude, and again
// right before it would exec bwrap.
func TestPreludeSupervisorGone(t *testing.T) {
	in := setup(t)
	t.Run("before the prelude", func(t *testing.T) {
		d := in.startDirect(t, directOpts{hangUp: true})
		r := d.report(t, 10*time.Second)
		if r.OK || r.Facts["reason"] != spec.ReasonSupervisorGone {
			t.Fatalf("report %+v, want reason %q", r, spec.ReasonSupervisorGone)
		}
	})
	t.Run("after the release byte", func(t *testing.T) {
		d := in.startDirect(t, directOpts{})
		d.sendSpec(t, in, "print('ran')")
		if _, err := d.releaseW.Write([]byte{1}); err != nil {
			t.Fatal(err)
		}
		d.releaseW.Close()
		var last helperReport
		for r := range d.reports {
			if r.strict != nil {
				t.Errorf("the supervisor would refuse report %+v: %v", r, r.strict)
			}
			last = r
		}
		if last.OK || last.Step != "exec" || last.Facts["reason"] != spec.ReasonSupervisorGone {
			t.Fatalf("last report %+v, want exec failed with reason %q (bwrap must not start)", last, spec.ReasonSupervisorGone)
		}
	})
}

// TestPreludeGroupsDropped: a supervisor started with supplementary groups
// does not pass them to the payload (bwrap cannot drop them once setgroups
// is denied in the namespace; the prelude drops them before).
func TestPreludeGroupsDropped(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{groups: []uint32{4, 24, 100}})
	r := s.exec(py("print([l.split(':',1)[1].strip() for l in open('/proc/self/status') if l.startswith('Groups:')][0])"))
	if r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("exit %v: %s", r.ExitCode, r.Stderr)
	}
	if g := strings.TrimSpace(r.Stdout); g != "" {
		t.Errorf("payload Groups: %q, want none (supervisor started with 4, 24, 100)", g)
	}
}

// TestI2CapsFromOutside reads the helper's capability sets from /proc of the
// live process, from outside: while it waits for the release byte (the
// last thing before it switches to the owner and execs bwrap), and then of
// bwrap itself and its parent through a wrapper installed as the helper
// config's bwrap, which records both and execs the real bwrap.
func TestI2CapsFromOutside(t *testing.T) {
	in := setup(t)
	outDir := in.path("i2-out-" + randID())
	if err := os.Mkdir(outDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(outDir, in.ownerUID, in.ownerGID); err != nil {
		t.Fatal(err)
	}
	wrapper := in.path("bin", "bwrap-i2-"+randID())
	script := "#!/bin/sh\ncat /proc/$$/status > " + outDir + "/bwrap.status\ncat /proc/$PPID/status > " + outDir + "/parent.status\nexec /usr/bin/bwrap \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	name := "nsinit-i2-" + randID()
	cfgPath := in.path("etc", name+".json")
	cfg := in.helperConfig()
	cfg.Bwrap = wrapper
	if err := writeJSON(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	if err := in.buildHelper(name, cfgPath, true); err != nil {
		t.Fatal(err)
	}
	d := in.startDirect(t, directOpts{helper: name})
	d.sendSpec(t, in, "print('ran')")
	for _, step := range []string{"enter", "network", "seccomp", "drop"} {
		if r := d.report(t, 10*time.Second); !r.OK || r.Step != step {
			t.Fatalf("report %+v, want %s ok", r, step)
		}
	}
	// Every thread of the live helper, from outside.
	pid := d.cmd.Process.Pid
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil || len(tasks) < 2 {
		t.Fatalf("helper threads: %v %v", tasks, err)
	}
	for _, task := range tasks {
		st, err := statusOf0(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if !capsZero(st) {
			t.Errorf("helper thread %s before exec: CapInh %s CapPrm %s CapEff %s CapAmb %s", task.Name(), st["CapInh"], st["CapPrm"], st["CapEff"], st["CapAmb"])
		}
		if u := strings.Fields(st["Uid"]); len(u) != 4 || u[0] != strconv.Itoa(in.uid) || u[2] != strconv.Itoa(in.ownerUID) {
			t.Errorf("helper thread %s Uid %v, want real %d and saved %d (the owner)", task.Name(), u, in.uid, in.ownerUID)
		}
		if st["Groups"] != "" {
			t.Errorf("helper thread %s Groups %q", task.Name(), st["Groups"])
		}
	}
	if _, err := d.releaseW.Write([]byte{1}); err != nil {
		t.Fatal(err)
	}
	if r := d.report(t, 10*time.Second); !r.OK || r.Step != "exec" {
		t.Fatalf("report %+v, want exec ok", r)
	}
	<-d.done
	for _, f := range []string{"bwrap.status", "parent.status"} {
		b, err := os.ReadFile(outDir + "/" + f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		st := map[string]string{}
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok {
				st[k] = strings.TrimSpace(v)
			}
		}
		if f == "parent.status" {
			// The helper, bwrap's relay: real uid the owner's, effective
			// and saved the service user's.
			t.Logf("bwrap's parent (the helper): Uid %s CapEff %s", st["Uid"], st["CapEff"])
			if u := strings.Fields(st["Uid"]); len(u) != 4 || u[0] != strconv.Itoa(in.ownerUID) || u[1] != strconv.Itoa(in.uid) || u[2] != strconv.Itoa(in.uid) {
				t.Errorf("relay Uid %v, want %d %d %d", u, in.ownerUID, in.uid, in.uid)
			}
		}
		if !capsZero(st) {
			t.Errorf("%s: CapInh %s CapPrm %s CapEff %s CapAmb %s", f, st["CapInh"], st["CapPrm"], st["CapEff"], st["CapAmb"])
		}
		if f == "bwrap.status" {
			want := strconv.Itoa(in.ownerUID)
			if u := strings.Fields(st["Uid"]); len(u) != 4 || u[0] != want || u[1] != want || u[2] != want {
				t.Errorf("bwrap Uid %v, want the owner %s in real, effective and saved", u, want)
			}
			t.Logf("bwrap from outside: Uid %s Gid %s Groups %q CapPrm %s CapEff %s NoNewPrivs %s", st["Uid"], st["Gid"], st["Groups"], st["CapPrm"], st["CapEff"], st["NoNewPrivs"])
		}
	}
}

// TestPreludeOwnerFile: the namespace-owner file is parsed strictly and a
// bad one fails the launch closed with reason owner_file/owner_ids and the
// fix -- reported before the helper reads its config (this helper's config
// does not even exist) or the spec.
func TestPreludeOwnerFile(t *testing.T) {
	in := setup(t)
	name := "nsinit-owner-" + randID()
	owner := in.path("etc", name+".owner")
	if err := in.buildHelperFrom(name, in.path("etc", name+"-missing.json"), owner, true); err != nil {
		t.Fatal(err)
	}
	valid := fmt.Sprintf("%d:%d\n", in.ownerUID, in.ownerGID)
	cases := []struct {
		name, content string
		mode          os.FileMode
		reason        string
	}{
		{"missing", "", 0, spec.ReasonOwnerFile},
		{"group-writable", valid, 0o664, spec.ReasonOwnerFile},
		{"no newline", strings.TrimSpace(valid), 0o644, spec.ReasonOwnerFile},
		{"a name", "sandboxd-ns:sandboxd-ns\n", 0o644, spec.ReasonOwnerFile},
		{"root", "0:0\n", 0o644, spec.ReasonOwnerIDs},
		{"the caller's own ids", fmt.Sprintf("%d:%d\n", in.uid, in.gid), 0o644, spec.ReasonOwnerIDs},
		{"the payload's id", "1000:1000\n", 0o644, spec.ReasonOwnerIDs},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_ = os.Remove(owner)
			if c.mode != 0 {
				if err := os.WriteFile(owner, []byte(c.content), c.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(owner, c.mode); err != nil {
					t.Fatal(err)
				}
			}
			d := in.startDirect(t, directOpts{helper: name})
			r := d.report(t, 10*time.Second)
			if r.OK || r.Step != "enter" || r.Facts["reason"] != c.reason {
				t.Fatalf("report %+v, want enter failed with reason %q", r, c.reason)
			}
			if !strings.Contains(r.Fix, "make install") || !strings.Contains(r.Fix, owner) {
				t.Errorf("fix %q does not name make install and %s", r.Fix, owner)
			}
			<-d.done
			if ws, ok := d.state.Sys().(syscall.WaitStatus); !ok || ws.ExitStatus() != spec.ExitEnter {
				t.Errorf("helper exit %v, want %d", d.state, spec.ExitEnter)
			}
		})
	}
}
