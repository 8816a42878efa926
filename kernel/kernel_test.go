package kernel

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/workspace"
)

// The kernel channel's sequence (I12) as the host drives it: protocol.Conn
// applies the rules, the driver (Kernel.read) applies them to a live
// channel, where a kernel may also write between execs. These drive it
// with crafted channels, written in the order a kernel would send them.

const readyLine = `{"type":"ready","language":"python","version":"3.11.2"}` + "\n"

func TestKernelChannelSequence(t *testing.T) {
	limits := workspace.ArtifactLimits{MaxFileBytes: 100, MaxFiles: 2, MaxTotalBytes: 150}
	const result1 = `{"type":"result","id":"e1","exit_code":0,"execution_count":1}` + "\n"
	for _, tc := range []struct {
		name      string
		first     string // written before any exec
		exec      bool   // then an exec "e1" runs
		rest      string // written next (during e1, if it runs)
		after     string // written once e1's result is in
		wantReady bool   // the ready frame was accepted
		wantErr   string // the error the exec (or the kernel) sees; "" = EOF
	}{
		{"ready then EOF", readyLine, false, "", "", true, ""},
		{"no ready", `{"type":"stream","id":"e1","name":"stdout","data":"x"}` + "\n", false, "", "", false, "not ready"},
		{"garbage first", "hello\n", false, "", "", false, "kernel protocol violation"},
		{"frame between execs", readyLine, false, `{"type":"stream","id":"e1","name":"stdout","data":"x"}` + "\n", "", true, "while no exec was running"},
		{"other exec's stream", readyLine, true, `{"type":"stream","id":"e2","name":"stdout","data":"x"}` + "\n", "", true, `exec "e2"`},
		{"other exec's result", readyLine, true, `{"type":"result","id":"e2","exit_code":0,"execution_count":1}` + "\n", "", true, `exec "e2"`},
		{"second ready", readyLine, true, readyLine, "", true, "inside exec"},
		{"frame after result", readyLine, true, result1, `{"type":"stream","id":"e1","name":"stdout","data":"x"}` + "\n", true, "while no exec was running"},
		{"garbage mid-exec", readyLine, true, "{\"type\":\"stream\"\n", "", true, "kernel protocol violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			k := newKernel("python", "")
			go k.read(pr)
			write := func(s string) {
				if s != "" {
					_, _ = pw.Write([]byte(s))
				}
			}
			write(tc.first)
			if err := <-k.ready; (err == nil) != tc.wantReady {
				t.Fatalf("ready: %v", err)
			}
			var s *sink
			if tc.exec {
				s = newSink("e1", 1<<10, limits, nil)
				k.begin <- s
			}
			write(tc.rest)
			if tc.after != "" {
				<-s.result
				write(tc.after)
			}
			pw.Close()
			select {
			case <-k.driven:
			case <-time.After(5 * time.Second):
				t.Fatal("read did not return")
			}
			err := k.broken
			if s != nil {
				select {
				case err = <-s.failed:
				default:
				}
			}
			switch {
			case tc.wantErr == "" && !errors.Is(err, io.EOF):
				t.Fatalf("err %v, want EOF", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			case tc.wantErr != "" && !errors.Is(err, protocol.ErrProtocol):
				t.Fatalf("err %v is not a protocol error", err)
			}
			if k.broken == nil {
				t.Fatal("the kernel is not marked broken after its channel ended")
			}
		})
	}
}

// TestExecSinkCaps: output keeps head and tail within the output limit and
// streams only what falls within it; displays beyond the artifact limits
// are dropped and flagged.
func TestExecSinkCaps(t *testing.T) {
	var events []Output
	s := newSink("e1", 100, workspace.ArtifactLimits{MaxFileBytes: 8, MaxFiles: 2, MaxTotalBytes: 12},
		func(e Output) bool { events = append(events, e); return true })
	for _, f := range []protocol.Frame{
		&protocol.Stream{ID: "e1", Name: "stdout", Data: strings.Repeat("a", 80)},
		&protocol.Stream{ID: "e1", Name: "stdout", Data: strings.Repeat("b", 80)},
		&protocol.Stream{ID: "e1", Name: "stdout", Data: "tail"},
		&protocol.Display{ID: "e1", MIME: "text/plain", Data: []byte(`"1234"`)},      // 6 bytes: kept
		&protocol.Display{ID: "e1", MIME: "text/plain", Data: []byte(`"123456789"`)}, // 11 > 8: dropped
		&protocol.Display{ID: "e1", MIME: "text/plain", Data: []byte(`"12345"`)},     // 7, total 13 > 12: dropped
		&protocol.Display{ID: "e1", MIME: "text/plain", Data: []byte(`"1"`)},         // kept (2nd)
		&protocol.Display{ID: "e1", MIME: "text/plain", Data: []byte(`"2"`)},         // a 3rd: dropped
	} {
		s.record(f)
	}
	if !s.stdout.Truncated() || len(s.stdout.String()) != 100 || !strings.HasSuffix(s.stdout.String(), "btail") || !strings.HasPrefix(s.stdout.String(), "aaa") {
		t.Fatalf("stdout %q truncated %v", s.stdout.String(), s.stdout.Truncated())
	}
	var streamed string
	for _, e := range events {
		if e.Type == "stdout" {
			streamed += e.Data
		}
	}
	if streamed != strings.Repeat("a", 80)+strings.Repeat("b", 20) {
		t.Fatalf("streamed %q, want the first 100 bytes", streamed)
	}
	if len(s.displays) != 2 || !s.dispTrunc {
		t.Fatalf("displays %d truncated %v", len(s.displays), s.dispTrunc)
	}
}

// TestExecRequestCarriesEnv: the exec's own env reaches the kernel on its
// execute request, for the runner to set for that exec alone.
func TestExecRequestCarriesEnv(t *testing.T) {
	x := Exec{Entrypoint: "main", Inputs: []byte(`{"a":1}`)}
	x.Launch.ExecID, x.Launch.Code, x.Launch.Stdin = "e1", "print(1)", []byte("in")
	x.Launch.Env = map[string]string{"GREETING": "hi"}
	r := x.request()
	if r.ID != "e1" || r.Code != "print(1)" || r.Stdin != "in" || r.Entrypoint != "main" || string(r.Inputs) != `{"a":1}` {
		t.Fatalf("request %+v", r)
	}
	if len(r.Env) != 1 || r.Env["GREETING"] != "hi" {
		t.Fatalf("env %v, want the exec's", r.Env)
	}
}

// TestProtocolViolationKillsKernel: a kernel that writes garbage while no
// exec runs is killed at once (its sandbox stopped, which closes its
// egress proxy), not merely marked broken until its session's next exec;
// a channel that merely ends is not a violation.
func TestProtocolViolationKillsKernel(t *testing.T) {
	for _, tc := range []struct {
		name     string
		write    string
		wantKill bool
	}{
		{"garbage between execs", "garbage\n", true},
		{"a frame between execs", `{"type":"stream","id":"e1","name":"stdout","data":"x"}` + "\n", true},
		{"the channel ends", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw := io.Pipe()
			k := newKernel("python", "")
			killed := make(chan struct{})
			k.setKill(func() { close(killed) })
			go k.read(pr)
			_, _ = pw.Write([]byte(readyLine))
			if err := <-k.ready; err != nil {
				t.Fatal(err)
			}
			if tc.write != "" {
				_, _ = pw.Write([]byte(tc.write))
			} else {
				pw.Close()
			}
			select {
			case <-killed:
				if !tc.wantKill {
					t.Fatal("a kernel whose channel ended was killed as a violator")
				}
			case <-time.After(time.Second):
				if tc.wantKill {
					t.Fatal("the kernel was not killed within a second of breaking the protocol")
				}
			}
			pw.Close()
		})
	}
}
