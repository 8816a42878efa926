package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func openLog(t *testing.T, fsync bool) (*FileWriter, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := OpenFile(path, fsync)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, path
}

// readLines parses every line of the log strictly, failing on anything that
// is not exactly one JSON object followed by a newline.
func readLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > 0 && raw[len(raw)-1] != '\n' {
		t.Fatalf("log does not end with a newline: %q", raw[max(0, len(raw)-40):])
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("line %d is not JSON: %v: %q", n, err, line)
		}
		if dec.More() || dec.InputOffset() != int64(len(line)) {
			t.Fatalf("line %d holds more than one object: %q", n, line)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// execLines drops the writer's own records (header, start, rotate, stop).
func execLines(lines []map[string]any) []map[string]any {
	var out []map[string]any
	for _, m := range lines {
		if step, _ := m["step"].(string); !IsLogRecord(step) {
			out = append(out, m)
		}
	}
	return out
}

func TestFileWriterRecordShape(t *testing.T) {
	w, path := openLog(t, true)
	when := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
	records := []Record{
		{ExecID: "e1", Step: StepAccept, Source: "supervisor", CallerUID: 1000, CallerGID: 1000, CallerPID: 42, OK: true},
		{ExecID: "e1", Step: StepExec, Source: "nsinit", OK: false, Error: "execve: ENOENT",
			Facts: map[string]any{"argv": []string{"/usr/bin/bwrap", "--"}}, Time: when},
		{ExecID: "e2", Step: StepReap, V: 99}, // V is always stamped
	}
	before := time.Now().UTC().Add(-time.Second)
	for _, r := range records {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	after := time.Now().UTC().Add(time.Second)
	if w.Count() != uint64(len(records)) {
		t.Fatalf("Count = %d, want %d", w.Count(), len(records))
	}

	all := readLines(t, path)
	if len(all) != len(records)+2 || all[0]["step"] != StepHeader || all[1]["step"] != StepStart {
		t.Fatalf("%d lines (want a header, a start record and %d records): %v", len(all), len(records), all)
	}
	for i, m := range all {
		for _, k := range []string{"seq", "prev_hash", "hash"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %v", i+1, k, m)
			}
		}
		if m["seq"] != json.Number(fmt.Sprint(i)) {
			t.Errorf("line %d: seq %v", i+1, m["seq"])
		}
	}
	lines := execLines(all)
	if len(lines) != len(records) {
		t.Fatalf("%d lines, want %d", len(lines), len(records))
	}
	for i, m := range lines {
		for _, k := range []string{"v", "time", "exec_id", "step", "source", "caller_uid", "caller_gid", "caller_pid", "ok"} {
			if _, ok := m[k]; !ok {
				t.Errorf("line %d lacks %q: %v", i+1, k, m)
			}
		}
		if m["v"] != json.Number(fmt.Sprint(SchemaVersion)) {
			t.Errorf("line %d: v = %v, want %d", i+1, m["v"], SchemaVersion)
		}
		if m["exec_id"] != records[i].ExecID || m["step"] != records[i].Step {
			t.Errorf("line %d: exec_id/step = %v/%v", i+1, m["exec_id"], m["step"])
		}
	}
	// omitempty: no error or facts on a record without them.
	if _, ok := lines[0]["error"]; ok {
		t.Error("empty error written")
	}
	if _, ok := lines[0]["facts"]; ok {
		t.Error("empty facts written")
	}
	if lines[1]["error"] != "execve: ENOENT" || lines[1]["ok"] != false {
		t.Errorf("line 2: %v", lines[1])
	}

	// Time: a given time is kept, an unset one is stamped now in UTC.
	var r0, r1 Record
	raw, _ := os.ReadFile(path)
	ls := strings.Split(strings.TrimSpace(string(raw)), "\n")[2:]
	if err := json.Unmarshal([]byte(ls[0]), &r0); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(ls[1]), &r1); err != nil {
		t.Fatal(err)
	}
	if !r1.Time.Equal(when) {
		t.Errorf("given time %v rewritten to %v", when, r1.Time)
	}
	if r0.Time.Before(before) || r0.Time.After(after) {
		t.Errorf("stamped time %v not within [%v, %v]", r0.Time, before, after)
	}
	if !strings.HasSuffix(lines[0]["time"].(string), "Z") {
		t.Errorf("stamped time %q is not UTC", lines[0]["time"])
	}
	if r0.CallerUID != 1000 || r0.CallerGID != 1000 || r0.CallerPID != 42 || r0.Source != "supervisor" || !r0.OK {
		t.Errorf("record 1 decoded as %+v", r0)
	}
}

func TestFileWriterMode(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	_, path := openLog(t, false)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("audit log mode %v, want 0600 even with umask 0", fi.Mode().Perm())
	}
}

func TestFileWriterAppends(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	for i := 0; i < 3; i++ {
		w, err := OpenFile(path, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(Record{ExecID: fmt.Sprint("e", i), Step: StepAccept}); err != nil {
			t.Fatal(err)
		}
		if w.Count() != 1 {
			t.Fatalf("a new writer counts %d, want 1 (its own records)", w.Count())
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	lines := execLines(readLines(t, path))
	if len(lines) != 3 {
		t.Fatalf("reopening truncated the log: %d lines", len(lines))
	}
	rep, err := Verify(os.DirFS(filepath.Dir(path)), filepath.Base(path), VerifyOptions{})
	if err != nil || !rep.Intact || rep.Starts != 3 || !rep.CleanStop {
		t.Fatalf("the chain across three writers: %+v %v", rep, err)
	}
	for i, m := range lines {
		if m["exec_id"] != fmt.Sprint("e", i) {
			t.Fatalf("line %d: %v", i, m)
		}
	}
}

func TestOpenFileErrors(t *testing.T) {
	if _, err := OpenFile(filepath.Join(t.TempDir(), "missing-dir", "audit.log"), false); err == nil {
		t.Fatal("OpenFile in a missing directory succeeded")
	}
	if _, err := OpenFile(t.TempDir(), false); err == nil {
		t.Fatal("OpenFile on a directory succeeded")
	}
}

func TestFileWriterErrors(t *testing.T) {
	w, path := openLog(t, false)
	before, _ := os.Stat(path)
	// A record that cannot be encoded is refused, not half-written.
	err := w.Write(Record{ExecID: "e", Step: StepDecide, Facts: map[string]any{"bad": make(chan int)}})
	if err == nil || !strings.Contains(err.Error(), "encode audit record e/decide") {
		t.Fatalf("unencodable record: err = %v", err)
	}
	if w.Count() != 0 {
		t.Fatalf("Count = %d after a refused record", w.Count())
	}
	if fi, _ := os.Stat(path); fi.Size() != before.Size() {
		t.Fatalf("refused record left %d bytes", fi.Size()-before.Size())
	}
	// A write after Close fails loudly: a record is never dropped silently.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Record{ExecID: "e", Step: StepReap}); err == nil {
		t.Fatal("write after Close succeeded")
	}
	if w.Count() != 0 {
		t.Fatalf("Count = %d after a failed write", w.Count())
	}
}

func TestFileWriterConcurrent(t *testing.T) {
	for _, fsync := range []bool{false, true} {
		t.Run(fmt.Sprintf("fsync=%v", fsync), func(t *testing.T) {
			w, path := openLog(t, fsync)
			const writers, each = 20, 50
			// A large fact makes each line bigger than a pipe buffer, so that
			// interleaving would show if writes were not serialised.
			big := strings.Repeat("x", 8<<10)
			var wg sync.WaitGroup
			errs := make(chan error, writers*each)
			for g := 0; g < writers; g++ {
				wg.Add(1)
				go func(g int) {
					defer wg.Done()
					for i := 0; i < each; i++ {
						facts := map[string]any{"g": g, "i": i}
						if i%10 == 0 {
							facts["big"] = big
						}
						errs <- w.Write(Record{ExecID: fmt.Sprintf("g%02d", g), Step: StepExec, Facts: facts})
					}
				}(g)
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if w.Count() != writers*each {
				t.Fatalf("Count = %d, want %d", w.Count(), writers*each)
			}
			lines := execLines(readLines(t, path))
			if len(lines) != writers*each {
				t.Fatalf("%d lines, want %d", len(lines), writers*each)
			}
			// Each goroutine's records are all there, in its own order.
			next := map[string]int64{}
			for _, m := range lines {
				id := m["exec_id"].(string)
				facts := m["facts"].(map[string]any)
				i, err := facts["i"].(json.Number).Int64()
				if err != nil {
					t.Fatal(err)
				}
				if i != next[id] {
					t.Fatalf("%s: record %d after %d", id, i, next[id]-1)
				}
				next[id]++
				if g, _ := facts["g"].(json.Number).Int64(); fmt.Sprintf("g%02d", g) != id {
					t.Fatalf("facts of %s carry g=%d", id, g)
				}
			}
			if len(next) != writers {
				t.Fatalf("%d writers seen, want %d", len(next), writers)
			}
		})
	}
}

func TestMemory(t *testing.T) {
	var m Memory
	var sink Sink = &m // Memory is a Sink
	for _, r := range []Record{
		{ExecID: "a", Step: StepAccept},
		{ExecID: "b", Step: StepAccept},
		{ExecID: "a", Step: StepDecide},
		{ExecID: "a", Step: StepReap, V: 7},
		{ExecID: "", Step: StepAccept},
	} {
		if err := sink.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	got := m.ForExec("a")
	if len(got) != 3 || got[0].Step != StepAccept || got[1].Step != StepDecide || got[2].Step != StepReap {
		t.Fatalf("ForExec(a) = %+v", got)
	}
	for _, r := range got {
		if r.V != SchemaVersion {
			t.Errorf("record %s/%s has v %d", r.ExecID, r.Step, r.V)
		}
	}
	if got := m.ForExec("b"); len(got) != 1 {
		t.Fatalf("ForExec(b) = %+v", got)
	}
	if got := m.ForExec("missing"); len(got) != 0 {
		t.Fatalf("ForExec(missing) = %+v", got)
	}
	if got := m.ForExec(""); len(got) != 1 {
		t.Fatalf("ForExec(\"\") = %+v", got)
	}
	// The returned slice is a copy: appending to or editing it leaves the sink alone.
	got = m.ForExec("a")
	got[0].Step = "mutated"
	if m.ForExec("a")[0].Step != StepAccept {
		t.Fatal("ForExec returned the sink's own records")
	}
}

func TestMemoryConcurrent(t *testing.T) {
	var m Memory
	var wg sync.WaitGroup
	for g := 0; g < 20; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 100; i++ {
				_ = m.Write(Record{ExecID: fmt.Sprint(g), Step: StepExec})
				_ = m.ForExec(fmt.Sprint((g + 1) % 20))
			}
		}(g)
	}
	wg.Wait()
	for g := 0; g < 20; g++ {
		if n := len(m.ForExec(fmt.Sprint(g))); n != 100 {
			t.Fatalf("exec %d has %d records, want 100", g, n)
		}
	}
}

func TestStepsInLaunchOrder(t *testing.T) {
	steps := []string{StepAccept, StepDecide, StepPrepare, StepEnter, StepNetwork, StepSeccomp, StepDrop, StepExec, StepReap}
	want := []string{"accept", "decide", "prepare", "enter", "network", "seccomp", "drop", "exec", "reap"}
	for i := range want {
		if steps[i] != want[i] {
			t.Errorf("step %d = %q, want %q", i, steps[i], want[i])
		}
	}
}
