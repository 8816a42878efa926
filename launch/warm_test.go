package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// warmRequest is the build request of a warm sandbox whose payload (the
// fake helper's shell script) stands in for the stub: it reads one header
// line, then runs as the exec.
func warmRequest(t *testing.T, script string) Request {
	r := fakeRequest(t, "ok read h; "+script)
	r.ExecID += "-warm"
	r.Kernel = "warm"
	return r
}

// TestWarmRunIsAnExec: a taken warm sandbox gets the header, then the
// exec's stdin and EOF; the result is the exec's (stdout, stderr, exit
// code, output limit); the exec's trail is warm_exec then reap, linked to
// the launch, whose own trail ends with a reap naming the exec; the
// workspace is gone; a second Run is refused with ErrWarmGone.
func TestWarmRunIsAnExec(t *testing.T) {
	h, sink := newTestLauncher(t, 0)
	build := warmRequest(t, `echo "header=$h"; cat; echo oops >&2; exit 3`)
	w, err := h.StartWarm(build)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("never ready: bwrap's pid 1 was reported")
	}
	ex := fakeRequest(t, "unused")
	ex.ExecID += "-exec"
	ex.Stdin = []byte("the stdin\n")
	var mu sync.Mutex
	var streamed []string
	ex.Output = func(name string, p []byte) { // both streams' goroutines
		mu.Lock()
		streamed = append(streamed, name+":"+string(p))
		mu.Unlock()
	}
	res, err := w.Run(context.Background(), ex, []byte("hello\n"))
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "header=hello\nthe stdin\n" || res.Stderr != "oops\n" || res.ExitCode == nil || *res.ExitCode != 3 || res.ID != ex.ExecID {
		t.Fatalf("result %+v", res)
	}
	if res.Policy.ProfileSHA256 != "fake-profile" || res.Policy.HelperVersion != "fake-1" {
		t.Errorf("attestation %+v, want the launch's exec step", res.Policy)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(streamed) == 0 {
		t.Error("the exec's Output func saw nothing")
	}
	if got := steps(sink.ForExec(ex.ExecID)); got != "warm_exec reap" {
		t.Fatalf("exec trail %q", got)
	}
	we := sink.ForExec(ex.ExecID)[0].FactMap()
	if we["launch_id"] != build.ExecID || we["warm"] != true {
		t.Errorf("warm_exec facts %v", we)
	}
	if f := last(sink.ForExec(ex.ExecID)).FactMap(); f["launch_id"] != build.ExecID || f["warm"] != true {
		t.Errorf("exec reap facts %v", f)
	}
	if got := steps(sink.ForExec(build.ExecID)); got != "prepare enter network seccomp drop exec reap" {
		t.Fatalf("launch trail %q", got)
	}
	if f := last(sink.ForExec(build.ExecID)).FactMap(); f["taken_by"] != ex.ExecID || f["pid_namespace_gone"] != true {
		t.Errorf("launch reap facts %v", f)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.WorkspaceRoot, build.ExecID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("warm workspace left behind: %v", err)
	}
	if _, err := w.Run(context.Background(), ex, []byte("again\n")); !errors.Is(err, ErrWarmGone) {
		t.Fatalf("second Run: %v, want ErrWarmGone", err)
	}
}

// TestWarmTimeoutKills: the exec's timeout starts at the take and kills it.
func TestWarmTimeoutKills(t *testing.T) {
	h, _ := newTestLauncher(t, 0)
	w, err := h.StartWarm(warmRequest(t, "exec sleep 30"))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // idle time does not count
	ex := fakeRequest(t, "unused")
	ex.ExecID += "-exec"
	ex.Limits.TimeoutMS = 300
	start := time.Now()
	res, err := w.Run(context.Background(), ex, []byte("go\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Signal == nil || *res.Signal != "SIGKILL" {
		t.Fatalf("result %+v", res)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the timeout took %v", took)
	}
}

// TestWarmStopUnused: an idle warm sandbox destroyed by its pool ends its
// trail with a reap naming no exec, and leaves no workspace.
func TestWarmStopUnused(t *testing.T) {
	h, sink := newTestLauncher(t, 0)
	build := warmRequest(t, "cat")
	w, err := h.StartWarm(build)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for last(sink.ForExec(build.ExecID)).Step != "exec" && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // built: the helper reported its exec step
	}
	w.Stop()
	<-w.Done()
	if got := steps(sink.ForExec(build.ExecID)); got != "prepare enter network seccomp drop exec reap" {
		t.Fatalf("launch trail %q", got)
	}
	if f := last(sink.ForExec(build.ExecID)).FactMap(); f["taken_by"] != nil || f["stopped"] != "cancelled" {
		t.Errorf("reap facts %v", f)
	}
	if _, err := os.Stat(filepath.Join(h.cfg.WorkspaceRoot, build.ExecID)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("warm workspace left behind: %v", err)
	}
	if _, err := w.Run(context.Background(), fakeRequest(t, "x"), nil); !errors.Is(err, ErrWarmGone) {
		t.Fatalf("Run after Stop: %v", err)
	}
}

// TestWarmDeadWhileIdle: a warm sandbox whose payload exits before a
// request is marked dead and refuses Run, so the exec launches cold.
func TestWarmDeadWhileIdle(t *testing.T) {
	h, _ := newTestLauncher(t, 0)
	w, err := h.StartWarm(fakeRequest(t, "ok exit 0"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Dead():
	case <-time.After(10 * time.Second):
		t.Fatal("never marked dead")
	}
	if _, err := w.Run(context.Background(), fakeRequest(t, "x"), []byte("h\n")); !errors.Is(err, ErrWarmGone) {
		t.Fatalf("Run of a dead sandbox: %v", err)
	}
	<-w.Done()
}
