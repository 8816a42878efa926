package launch

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// The fake helper is this test binary, started by the launcher under the
// helper's name (argv[0] "sandboxd-nsinit", as the launcher always starts
// it; TestMain dispatches on it). It speaks the helper's side of the
// nsinit/spec fd contract -- spec on fd 3, reports on fd 4, bwrap's JSON
// status on fd 5, the release byte on fd 6 -- and behaves as the scenario
// named by the first word of the spec's code says. Its "payload" is a real
// child process, so pidfds, kills and reaps are real.

const fakeHelperName = "sandboxd-nsinit"

// fakeExecFacts are the facts the fake's exec report carries: every fact
// of the schema present, with the attestation the tests look for.
var fakeExecFacts = func() json.RawMessage {
	f := fakeFacts(facts.StepExec).(*facts.Exec)
	f.ProfileSHA256, f.MountsSHA256, f.HelperVersion = "fake-profile", "fake-mounts", "fake-1"
	b, _ := json.Marshal(f)
	return b
}()

// fakeFacts returns step's typed facts with every field set to a non-zero
// value, so that the strict decoder (spec.ParseReport) finds each fact the
// schema requires: the relay's permit checks are what these tests probe.
func fakeFacts(step string) facts.Facts {
	f := facts.New(step)
	if f == nil {
		return nil
	}
	fillNonZero(reflect.ValueOf(f).Elem())
	return f
}

func fillNonZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				fillNonZero(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fillNonZero(v.Elem())
	case reflect.String:
		v.SetString("fake")
	case reflect.Bool:
		v.SetBool(false)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fillNonZero(s.Index(0))
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fillNonZero(k)
		fillNonZero(e)
		m.SetMapIndex(k, e)
		v.Set(m)
	}
}

type fake struct {
	rep, status, release *os.File
	arg                  string // the rest of the spec's code
	workspace            string // the exec's workspace (the code's second word)
}

func fakeHelper() int {
	// The launcher hands fds 3-6 over without close-on-exec (as it does
	// to the real helper, which closes them before bwrap's payload runs).
	// The fake's payload is a plain child: without this it inherits the
	// status and report pipes, and a payload that outlives a kill holds
	// them open, so teardown waits for an EOF that never comes.
	for fd := spec.FDSpec; fd <= spec.FDRelease; fd++ {
		unix.CloseOnExec(fd)
	}
	b, err := io.ReadAll(os.NewFile(spec.FDSpec, "spec"))
	if err != nil {
		return spec.ExitUsage
	}
	var sp spec.LaunchSpec
	if err := json.Unmarshal(b, &sp); err != nil {
		return spec.ExitSpec
	}
	scenario, arg, _ := strings.Cut(string(sp.Code), " ")
	f := &fake{rep: os.NewFile(spec.FDReport, "report"), status: os.NewFile(spec.FDStatus, "status"),
		release: os.NewFile(spec.FDRelease, "release"), arg: arg}
	if root, rest, ok := strings.Cut(arg, " "); ok && strings.HasPrefix(root, "/") {
		f.workspace, f.arg = filepath.Join(root, sp.Workspace), rest
	}
	if sp.Runtime == "probe" {
		scenario = "ok" // the probe runtime: /usr/bin/true
	}
	run, ok := fakeScenarios[scenario]
	if !ok {
		fmt.Fprintf(os.Stderr, "fake helper: no scenario %q\n", scenario)
		return spec.ExitUsage
	}
	return run(f)
}

// fakeScenarios are the helper behaviours the tests choose from.
var fakeScenarios = map[string]func(f *fake) int{
	// ok: every step in order, then the payload (a shell running arg).
	"ok": func(f *fake) int { return f.good(f.arg) },
	// out-of-order: seccomp before network.
	"out-of-order": func(f *fake) int {
		f.steps("enter", "seccomp", "network", "drop")
		return f.execAndRun("exit 0")
	},
	// twice: enter reported twice.
	"twice": func(f *fake) int {
		f.steps("enter", "enter", "network", "seccomp", "drop")
		return f.execAndRun("exit 0")
	},
	// unknown-step: a step that is not in the table.
	"unknown-step": func(f *fake) int {
		f.steps("enter", "mount", "network", "seccomp", "drop")
		return f.execAndRun("exit 0")
	},
	// after-exec: a report after the sequence ended.
	"after-exec": func(f *fake) int {
		f.steps("enter", "network", "seccomp", "drop")
		f.awaitRelease()
		f.report(spec.Report{Step: "exec", OK: true, Facts: fakeExecFacts})
		f.steps("drop")
		return f.payload("exit 0")
	},
	// no-exec: the payload runs, but the exec step is never reported.
	"no-exec": func(f *fake) int {
		f.steps("enter", "network", "seccomp", "drop")
		f.awaitRelease()
		return f.payload("echo ran; exit 0")
	},
	// garbage: a line that is not a report.
	"garbage": func(f *fake) int {
		f.steps("enter")
		_, _ = f.rep.WriteString("this is not json\n")
		f.steps("network", "seccomp", "drop")
		return f.execAndRun("exit 0")
	},
	// huge: a 4 MiB line, then it goes on as if nothing happened.
	"huge": func(f *fake) int {
		f.steps("enter")
		_, _ = f.rep.Write([]byte(`{"step":"network","ok":true,"facts":{"x":"` + strings.Repeat("x", 4<<20) + "\"}}\n"))
		f.steps("seccomp", "drop")
		return f.execAndRun("exit 0")
	},
	// fail-enter: the helper fails its first step, the way nsinit does.
	"fail-enter": func(f *fake) int {
		f.report(spec.Report{Step: "enter", Error: "clone(CLONE_NEWUSER): operation not permitted", Fix: "allow user namespaces"})
		return spec.ExitEnter
	},
	// prelude-drop: the C prelude's own failure, reported before any step.
	"prelude-drop": func(f *fake) int {
		f.report(spec.Report{Step: "drop", Error: "capset: operation not permitted"})
		return spec.ExitDrop
	},
	// hang: the payload sleeps; once it is killed the helper neither exits
	// nor heeds SIGTERM (a wedged bwrap): only SIGKILL stops it.
	"hang": func(f *fake) int {
		signal.Ignore(syscall.SIGTERM)
		f.steps("enter", "network", "seccomp", "drop")
		f.awaitRelease()
		f.report(spec.Report{Step: "exec", OK: true, Facts: fakeExecFacts})
		f.payload("exec sleep 60")
		for {
			time.Sleep(time.Hour)
		}
	},
	// slow-start: never gets to bwrap (no child pid), sleeps.
	"slow-start": func(f *fake) int {
		signal.Ignore(syscall.SIGTERM)
		f.steps("enter")
		time.Sleep(time.Minute)
		return 0
	},
	// mid-setup: bwrap caught between its clone and its status report: a
	// child that would outlive a killed helper (no parent-death signal),
	// its pid written to the file named by arg. SIGTERM is handled as
	// nsinit's relay handles it: the child is killed, then the helper dies
	// of SIGKILL as it relays bwrap's death.
	"mid-setup": func(f *fake) int {
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		f.steps("enter", "network", "seccomp", "drop")
		f.awaitRelease()
		f.report(spec.Report{Step: "exec", OK: true, Facts: fakeExecFacts})
		child := exec.Command("/bin/sleep", "60")
		if err := child.Start(); err != nil {
			return 1
		}
		_ = os.WriteFile(f.arg, []byte(strconv.Itoa(child.Process.Pid)), 0o600)
		<-term
		_ = child.Process.Kill()
		_, _ = child.Process.Wait()
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		return 137
	},
	// release-watch: the payload runs for arg ms; then the helper says on
	// stdout whether the release pipe's write end had hung up meanwhile.
	"release-watch": func(f *fake) int {
		f.steps("enter", "network", "seccomp", "drop")
		f.awaitRelease()
		f.report(spec.Report{Step: "exec", OK: true, Facts: fakeExecFacts})
		code := f.payload("sleep 0.3")
		fds := []unix.PollFd{{Fd: int32(f.release.Fd()), Events: unix.POLLIN}}
		_, _ = unix.Poll(fds, 0)
		if fds[0].Revents&unix.POLLHUP != 0 {
			fmt.Println("release: hung up")
		} else {
			fmt.Println("release: open")
		}
		return code
	},
	// grow: the payload writes a 64 KiB file into the workspace every
	// 50 ms for 10 s; each file is small, so only the watcher can stop it.
	"grow": func(f *fake) int {
		return f.good(fmt.Sprintf("cd %s && for i in $(seq 2000); do head -c 65536 /dev/zero > f$i; sleep 0.05; done", f.workspace))
	},
	// unmeasurable: a path longer than PATH_MAX appears in the workspace
	// (so measuring it fails), then the payload writes a little every 50 ms.
	"unmeasurable": func(f *fake) int {
		deep := strings.Repeat("d", 250)
		if err := os.Chdir(f.workspace); err != nil {
			return 1
		}
		for i := 0; i < 20; i++ { // 20 x 251 bytes: past 4096
			if os.Mkdir(deep, 0o700) != nil || os.Chdir(deep) != nil {
				return 1
			}
		}
		return f.good(fmt.Sprintf("cd %s && for i in $(seq 2000); do echo x > f$i; sleep 0.05; done", f.workspace))
	},
}

func (f *fake) report(r spec.Report) {
	b, _ := json.Marshal(r)
	_, _ = f.rep.Write(append(b, '\n'))
}

func (f *fake) steps(steps ...string) {
	for _, s := range steps {
		b, _ := json.Marshal(fakeFacts(s))
		if facts.New(s) == nil { // an unknown step: no facts to give
			b = nil
		}
		f.report(spec.Report{Step: s, OK: true, Facts: b})
	}
}

func (f *fake) awaitRelease() {
	var b [1]byte
	if n, err := f.release.Read(b[:]); n != 1 || err != nil {
		fmt.Fprintln(os.Stderr, "fake helper: not released")
		os.Exit(spec.ExitUsage)
	}
}

// good is the whole sequence in order, then the payload.
func (f *fake) good(script string) int {
	f.steps("enter", "network", "seccomp", "drop")
	return f.execAndRun(script)
}

func (f *fake) execAndRun(script string) int {
	f.awaitRelease()
	f.report(spec.Report{Step: "exec", OK: true, Facts: fakeExecFacts})
	return f.payload(script)
}

// payload runs script as bwrap would run the sandbox's pid 1: its pid on
// the status fd, then its exit status. It returns the helper's exit
// status, which (as bwrap's) is the payload's.
func (f *fake) payload(script string) int {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The real payload dies with bwrap's pid namespace; the fake's, which
	// has none, dies with the helper instead.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "fake helper:", err)
		return 1
	}
	fmt.Fprintf(f.status, "{\"child-pid\": %d}\n", cmd.Process.Pid)
	_ = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	fmt.Fprintf(f.status, "{\"exit-code\": %d}\n", code)
	return code
}
