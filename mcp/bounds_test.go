package mcp

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// serveLines runs a server over in and returns every line it wrote, and
// how long Serve took.
func serveLines(t *testing.T, s *Server, in io.Reader) ([]string, time.Duration) {
	t.Helper()
	outR, outW := io.Pipe()
	var lines []string
	read := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		close(read)
	}()
	start := time.Now()
	if err := s.Serve(context.Background(), in, outW); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	outW.Close()
	<-read
	return lines, took
}

func toolCall(id int, name string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "tools/call",
		"params": map[string]any{"name": name, "arguments": args}})
	return string(b) + "\n"
}

// bigDisplays answers every exec with displays adding up to n bytes.
type bigDisplays struct {
	fakeBackend
	n int
}

func (b *bigDisplays) Exec(context.Context, api.ExecRequest) (*api.ExecResult, []byte, error) {
	zero := 0
	png := base64.StdEncoding.EncodeToString(make([]byte, b.n/2))
	return &api.ExecResult{ExitCode: &zero, Displays: []api.Display{{MIME: "image/png", DataBase64: png}, {MIME: "image/png", DataBase64: png}}}, nil, nil
}

// TestAnswersFitOneClientMessage: no line the server writes outgrows the
// bound an MCP client reads in one message. The largest file download_file
// returns fits as binary; a larger one is refused; a run_code result too
// large to send becomes an error result the model can read.
func TestAnswersFitOneClientMessage(t *testing.T) {
	fits := make([]byte, maxDownload)
	_, _ = rand.Read(fits)
	back := &fakeBackend{files: map[string][]byte{"fits.bin": fits, "over.bin": make([]byte, maxDownload+1)}}
	in := toolCall(1, "download_file", map[string]any{"session": "s1", "path": "fits.bin"}) +
		toolCall(2, "download_file", map[string]any{"session": "s1", "path": "over.bin"})
	lines, _ := serveLines(t, New(back, "1", nil), strings.NewReader(in))
	if len(lines) != 2 {
		t.Fatalf("%d answers, want 2", len(lines))
	}
	byID := map[float64]toolResult{}
	for _, l := range lines {
		if len(l) > maxAnswer {
			t.Errorf("an answer of %d bytes; the bound is %d", len(l), maxAnswer)
		}
		var r struct {
			ID     float64    `json:"id"`
			Result toolResult `json:"result"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		byID[r.ID] = r.Result
	}
	if r := byID[1]; r.IsError || len(r.Content) != 1 || r.Content[0].Resource == nil || len(r.Content[0].Resource.Blob) != base64.StdEncoding.EncodedLen(maxDownload) {
		t.Errorf("the largest download did not come back whole: isError %v", r.IsError)
	}
	if r := byID[2]; !r.IsError || !strings.Contains(r.Content[0].Text, "the most download_file returns") {
		t.Errorf("a download over the bound: %+v", r)
	}

	lines, _ = serveLines(t, New(&bigDisplays{n: maxAnswer}, "1", nil), strings.NewReader(toolCall(3, "run_code", map[string]any{"language": "python", "code": "1"})))
	if len(lines) != 1 || len(lines[0]) > maxAnswer {
		t.Fatalf("run_code with %d bytes of displays: %d answers, first %d bytes", maxAnswer, len(lines), len(lines[0]))
	}
	if !strings.Contains(lines[0], `"isError":true`) || !strings.Contains(lines[0], "more than the") {
		t.Fatalf("an oversized result is not an error result the model can read: %.300s", lines[0])
	}
}

// slowExec holds every exec until release is closed or its context ends.
type slowExec struct {
	fakeBackend
	release chan struct{}
}

func (s *slowExec) Exec(ctx context.Context, req api.ExecRequest) (*api.ExecResult, []byte, error) {
	select {
	case <-s.release:
		return s.fakeBackend.Exec(ctx, req)
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
}

// TestInputEndFinishesRunningCalls: a client that sends a call and closes
// stdin still gets the call's answer (not "context canceled"); a call that
// outlasts the grace period is cancelled and Serve returns.
func TestInputEndFinishesRunningCalls(t *testing.T) {
	back := &slowExec{fakeBackend: fakeBackend{files: map[string][]byte{}}, release: make(chan struct{})}
	go func() { time.Sleep(300 * time.Millisecond); close(back.release) }()
	lines, _ := serveLines(t, New(back, "1", nil), strings.NewReader(toolCall(1, "run_code", map[string]any{"language": "python", "code": "print(1)"})))
	if len(lines) != 1 || !strings.Contains(lines[0], `python:print(1)`) || strings.Contains(lines[0], "canceled") {
		t.Fatalf("the call running when stdin closed: %v", lines)
	}

	stuck := &slowExec{fakeBackend: fakeBackend{files: map[string][]byte{}}, release: make(chan struct{})}
	s := New(stuck, "1", nil)
	s.DrainGrace = 200 * time.Millisecond
	lines, took := serveLines(t, s, strings.NewReader(toolCall(2, "run_code", map[string]any{"language": "python", "code": "1"})))
	if took > 5*time.Second {
		t.Fatalf("Serve took %v with a grace of %v", took, s.DrainGrace)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], `"isError":true`) {
		t.Fatalf("a call cancelled after the grace period: %v", lines)
	}
}
