package launch

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSandboxChannelAndStop: a long-lived launch hands the caller the
// payload's stdin and stdout while it runs, goes through the same phases
// and records as an exec, and Stop kills and reaps it.
func TestSandboxChannelAndStop(t *testing.T) {
	h, sink := newTestLauncher(t, 0)
	req := fakeRequest(t, "ok while read line; do echo \"got $line\"; done")
	lines := make(chan string, 4)
	sb, err := h.Start(context.Background(), req, func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-time.After(5 * time.Second):
				return
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"one", "two"} {
		if _, err := io.WriteString(sb.Stdin(), want+"\n"); err != nil {
			t.Fatal(err)
		}
		select {
		case got := <-lines:
			if got != "got "+want {
				t.Fatalf("got %q", got)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no answer over the channel")
		}
	}
	select {
	case <-sb.Done():
		t.Fatal("the sandbox ended on its own")
	default:
	}
	ex := sb.Stop()
	if ex.Err != nil || ex.Result == nil || ex.Result.Signal != nil || ex.Stopped != "cancelled" {
		t.Fatalf("exit %+v (result %+v)", ex, ex.Result)
	}
	if got, want := steps(sink.ForExec(req.ExecID)), "prepare enter network seccomp drop exec reap"; got != want {
		t.Fatalf("trail %q, want %q", got, want)
	}
	if f := last(sink.ForExec(req.ExecID)).FactMap(); f["pid_namespace_gone"] != true || f["stopped"] != "cancelled" {
		t.Fatalf("reap facts %v", f)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.WorkspaceRoot, req.ExecID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("one-shot workspace left behind: %v", err)
	}
}

// TestSandboxExitsOnItsOwn: a payload that exits ends the sandbox with its
// status; stderr is kept, and a stdout func that stops reading early does
// not block the payload (the rest is drained).
func TestSandboxExitsOnItsOwn(t *testing.T) {
	h, _ := newTestLauncher(t, 0)
	req := fakeRequest(t, "ok head -c 1000000 /dev/zero; echo bye >&2; exit 7")
	sb, err := h.Start(context.Background(), req, func(r io.Reader) { _, _ = r.Read(make([]byte, 10)) })
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the sandbox did not end")
	}
	ex := sb.Exit()
	if ex.Err != nil || ex.Result == nil || ex.Result.ExitCode == nil || *ex.Result.ExitCode != 7 || ex.Stderr != "bye\n" || ex.Stopped != "exited" {
		t.Fatalf("exit %+v (result %+v)", ex, ex.Result)
	}
}

// TestSandboxOwnerContext: the owner's context ending stops the sandbox.
func TestSandboxOwnerContext(t *testing.T) {
	h, _ := newTestLauncher(t, 0)
	ctx, cancel := context.WithCancel(context.Background())
	sb, err := h.Start(ctx, fakeRequest(t, "ok sleep 60"), func(r io.Reader) { _, _ = io.Copy(io.Discard, r) })
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-sb.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the sandbox outlived its owner's context")
	}
}

// TestSandboxAttestsWhileRunning: a long-lived sandbox's confinement (the
// helper's exec report) is known while it runs, so an exec in it (a
// kernel's) attests it; without a cgroup its limits are attested as
// applied: memory, pids and CPU 0.
func TestSandboxAttestsWhileRunning(t *testing.T) {
	h, _ := newTestLauncher(t, 0)
	req := fakeRequest(t, "ok while read line; do echo \"got $line\"; done")
	lines := make(chan string, 1)
	sb, err := h.Start(context.Background(), req, func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lines <- sc.Text()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Stop()
	if _, err := io.WriteString(sb.Stdin(), "x\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lines: // the payload runs: the helper's exec report came first
	case <-time.After(5 * time.Second):
		t.Fatal("no answer over the channel")
	}
	deadline := time.Now().Add(5 * time.Second)
	for sb.ExecFacts() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the relay reads to EOF of the report pipe
	}
	limits := req.Limits
	limits.MemoryBytes, limits.Pids, limits.CPUs = 1<<28, 64, 1
	p := Attest(sb.ExecFacts(), h.AppliedLimits(limits))
	if p.ProfileSHA256 != "fake-profile" || p.MountsSHA256 != "fake-mounts" || p.HelperVersion != "fake-1" {
		t.Errorf("attested confinement %+v, want the helper's exec report", p)
	}
	if p.Limits.MemoryBytes != 0 || p.Limits.Pids != 0 || p.Limits.CPUs != 0 || p.Limits.TimeoutMS != limits.TimeoutMS {
		t.Errorf("attested limits %+v without a cgroup", p.Limits)
	}
}
