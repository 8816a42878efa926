package supervisor

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/kernel/protocol"
	"github.com/sandboxd/sandboxd/workspace"
)

// The kernel channel's sequence (I12): what the decoder does not check,
// kernel.read and execSink do. These drive them with crafted channels.

const readyLine = `{"type":"ready","language":"python","version":"3.11.2"}` + "\n"

func readChannel(t *testing.T, k *kernel, channel string) {
	t.Helper()
	done := make(chan struct{})
	go func() { k.read(strings.NewReader(channel)); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("read did not return")
	}
}

func TestKernelChannelSequence(t *testing.T) {
	limits := workspace.ArtifactLimits{MaxFileBytes: 100, MaxFiles: 2, MaxTotalBytes: 150}
	for _, tc := range []struct {
		name      string
		channel   string
		sink      bool   // an exec "e1" is running
		wantReady bool   // the ready frame was accepted
		wantErr   string // the error the exec (or the kernel) sees; "" = EOF
	}{
		{"ready then EOF", readyLine, false, true, ""},
		{"no ready", `{"type":"stream","id":"e1","name":"stdout","data":"x"}` + "\n", true, false, "not ready"},
		{"garbage first", "hello\n", true, false, "kernel protocol violation"},
		{"frame between execs", readyLine + `{"type":"stream","id":"e1","name":"stdout","data":"x"}` + "\n", false, true, "while no exec was running"},
		{"other exec's stream", readyLine + `{"type":"stream","id":"e2","name":"stdout","data":"x"}` + "\n", true, true, `of exec "e2"`},
		{"other exec's result", readyLine + `{"type":"result","id":"e2","exit_code":0,"execution_count":1}` + "\n", true, true, `result of exec "e2"`},
		{"second ready", readyLine + readyLine, true, true, "during an exec"},
		{"frame after result", readyLine + `{"type":"result","id":"e1","exit_code":0,"execution_count":1}` + "\n" +
			`{"type":"stream","id":"e1","name":"stdout","data":"x"}` + "\n", true, true, "after the exec's result"},
		{"garbage mid-exec", readyLine + "{\"type\":\"stream\"\n", true, true, "kernel protocol violation"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := newKernel("python")
			var sink *execSink
			if tc.sink {
				sink = newSink("e1", 1<<10, limits, nil)
				k.sink = sink
			}
			readChannel(t, k, tc.channel)
			if err := <-k.ready; (err == nil) != tc.wantReady {
				t.Fatalf("ready: %v", err)
			}
			err := k.broken
			if sink != nil {
				select {
				case err = <-sink.failed:
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
	var events []event
	s := newSink("e1", 100, workspace.ArtifactLimits{MaxFileBytes: 8, MaxFiles: 2, MaxTotalBytes: 12},
		func(e event) bool { events = append(events, e); return true })
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
		if err := s.frame(f); err != nil {
			t.Fatal(err)
		}
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

func TestEventLines(t *testing.T) {
	for _, tc := range []struct {
		e    event
		want string
	}{
		{event{Type: "stdout", Data: "a\n"}, `{"type":"stdout","data":"a\n"}`},
		{event{Type: "stderr", Data: ""}, `{"type":"stderr","data":""}`},
		{event{Type: "result", Result: &ExecResult{ID: "x"}}, `{"type":"result","id":"x",`},
		{event{Type: "error", Error: apiErr("internal", "boom")}, `{"type":"error","error":{"code":"internal","message":"boom"}}`},
	} {
		got := string(tc.e.line())
		if !strings.HasPrefix(got, tc.want) || !strings.HasSuffix(got, "}\n") || strings.Count(got, "\n") != 1 {
			t.Errorf("line %q, want prefix %q", got, tc.want)
		}
	}
}
