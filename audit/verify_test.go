package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/audit/audittest"
	"github.com/sandboxd/sandboxd/audit/facts"
)

// launch writes the records one exec of the given kind leaves.
func launch(t *testing.T, w Sink, id, kind string) {
	t.Helper()
	c := func(r Record) Record {
		r.ExecID, r.CallerUID, r.CallerGID, r.CallerPID = id, 1000, 1000, 4242
		if r.Source == "" {
			r.Source = SourceSupervisor
		}
		return r
	}
	recs := []Record{
		{Step: StepAccept, OK: true, Facts: map[string]any{"method": "POST", "path": "/v1/exec", "body_bytes": 40}},
	}
	helper := func(failAt string) {
		for _, s := range []string{StepEnter, StepNetwork, StepSeccomp, StepDrop, StepExec} {
			r := Record{Step: s, Source: SourceNsinit, OK: s != failAt, Facts: map[string]any{"t_us": 100, "profile_sha256": strings.Repeat("ab", 32)}}
			if s == failAt {
				r.Error = "bwrap: stat /nonexistent/bwrap: no such file or directory; fix: install bubblewrap"
			}
			recs = append(recs, r)
			if s == failAt {
				return
			}
		}
	}
	switch kind {
	case "refused":
		recs = append(recs, Record{Step: StepDecide, OK: false, Error: `language "ruby" is not supported`, Facts: map[string]any{"code": "invalid_argument"}})
	case "ok", "timeout":
		recs = append(recs, Record{Step: StepDecide, OK: true, Facts: map[string]any{"runtime": "python", "env_names": []string{"A"}}},
			Record{Step: StepPrepare, OK: true, Facts: map[string]any{"workspace": "/w/" + id}})
		helper("")
		reap := Record{Step: StepReap, OK: true, Facts: map[string]any{"exit_code": 0, "timed_out": false}}
		if kind == "timeout" {
			reap.Facts = map[string]any{"exit_code": nil, "signal": "SIGKILL", "timed_out": true}
		}
		recs = append(recs, reap)
	case "helper-failure":
		recs = append(recs, Record{Step: StepDecide, OK: true}, Record{Step: StepPrepare, OK: true})
		helper(StepExec)
		recs = append(recs, Record{Step: StepReap, OK: false, Error: "sandbox helper failed at step \"exec\""})
	case "open": // the supervisor dies during the run
		recs = append(recs, Record{Step: StepDecide, OK: true}, Record{Step: StepPrepare, OK: true})
		helper("")
	default:
		t.Fatalf("kind %q", kind)
	}
	for _, r := range recs {
		if err := w.Write(c(r)); err != nil {
			t.Fatal(err)
		}
	}
}

var kinds = []string{"ok", "refused", "helper-failure", "timeout"}

// crash closes the writer's files without a stop record, as a SIGKILL would.
func crash(w *FileWriter) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.f.Close()
	w.hf.Close()
	if w.fwd != nil {
		w.fwd.Close()
	}
}

func verifyPath(t *testing.T, path string, o VerifyOptions) *Report {
	t.Helper()
	rep, err := Verify(os.DirFS(filepath.Dir(path)), filepath.Base(path), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func mustIntact(t *testing.T, rep *Report) {
	t.Helper()
	if !rep.Intact || rep.Break != nil {
		t.Fatalf("log not intact: %v\n%+v", rep.Break, rep)
	}
}

// TestHashIsOverTheBytes: an auditor recomputes the hash as SCHEMA.md says,
// from the bytes on disk, with no JSON canonicalisation.
func TestHashIsOverTheBytes(t *testing.T) {
	w, path := openLog(t, true)
	launch(t, w, "e1", "ok")
	raw, _ := os.ReadFile(path)
	prev := ZeroHash
	for i, line := range bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n")) {
		body := string(line[:len(line)-75]) + "}"
		stated := string(line[len(line)-66 : len(line)-2])
		sum := sha256.Sum256([]byte(body))
		if hex.EncodeToString(sum[:]) != stated {
			t.Fatalf("line %d: sha256(body) != hash", i+1)
		}
		var r Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if r.PrevHash != prev || r.Seq != uint64(i) || r.Hash != stated {
			t.Fatalf("line %d: seq %d prev %s, want %d %s", i+1, r.Seq, r.PrevHash, i, prev)
		}
		// The line is exactly what encoding/json makes of the record.
		again, _ := json.Marshal(r)
		if !bytes.Equal(again, line) {
			t.Fatalf("line %d is not json.Marshal of its record:\n%s\n%s", i+1, line, again)
		}
		prev = stated
	}
}

func TestVerifyIntactAcrossRotationAndRestarts(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	n := 0
	for run := 0; run < 3; run++ {
		w, err := Open(path, Options{RotateBytes: 3000, Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 6; i++ {
			launch(t, w, fmt.Sprintf("r%de%d", run, i), kinds[n%len(kinds)])
			n++
		}
		if run == 1 {
			launch(t, w, "lost", "open")
			crash(w)
			continue
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rep := verifyPath(t, path, VerifyOptions{})
	mustIntact(t, rep)
	if len(rep.Files) < 4 {
		t.Fatalf("only %d files with a 3000-byte rotation", len(rep.Files))
	}
	for i, f := range rep.Files {
		if i < len(rep.Files)-1 && !f.Rotated {
			t.Errorf("file %s does not end with its rotate record", f.Name)
		}
		if f.Records == 0 || f.FileIndex != i+1 {
			t.Errorf("file %+v", f)
		}
	}
	if rep.Execs != 19 || rep.Ran != 9 || rep.Refused != 5 || rep.Failed != 4 || rep.Interrupted != 1 || len(rep.Open) != 0 {
		t.Errorf("exec counts: execs %d ran %d refused %d failed %d interrupted %d open %v",
			rep.Execs, rep.Ran, rep.Refused, rep.Failed, rep.Interrupted, rep.Open)
	}
	if rep.Starts != 3 || !rep.CleanStop || rep.Tail != "head file" || rep.FirstSeq != 0 || rep.LastSeq != uint64(rep.Records-1) {
		t.Errorf("report %+v", rep)
	}
	// A rotated file verified on its own ends with its rotate record.
	rep = verifyPath(t, filepath.Join(dir, "audit.log.2"), VerifyOptions{})
	mustIntact(t, rep)
	if rep.Tail != "rotate record" || len(rep.Files) != 2 {
		t.Errorf("rotated file alone: %+v", rep)
	}
}

// TestMutationsSynthetic applies every kind of tampering at every position
// of a log with rotated files; verify must catch each one. The integration
// test does the same on a log of real execs.
func TestMutationsSynthetic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, err := Open(path, Options{RotateBytes: 2500})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 8; i++ {
		launch(t, w, fmt.Sprintf("e%d", i), kinds[i%len(kinds)])
	}
	launch(t, w, "running", "open")
	l, err := audittest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ := Verify(l.FS(), "audit.log", VerifyOptions{})
	mustIntact(t, rep)
	if len(rep.Open) != 1 || rep.Open[0].ExecID != "running" {
		t.Fatalf("open execs %+v", rep.Open)
	}
	applied, caught := map[string]int{}, map[string]int{}
	for _, m := range audittest.Mutations(l, "audit.log", audittest.Options{Seed: 1, MaxEditsPerFile: 150}) {
		applied[m.Kind]++
		rep, err := Verify(m.Log.FS(), "audit.log", VerifyOptions{ChainOnly: true})
		if err != nil {
			t.Fatalf("%s %s: %v", m.Kind, m.Where, err)
		}
		if rep.Break == nil {
			t.Errorf("NOT DETECTED: %s at %s", m.Kind, m.Where)
			continue
		}
		caught[m.Kind]++
	}
	for _, k := range audittest.Kinds {
		t.Logf("%-22s applied %5d  detected %5d", k, applied[k], caught[k])
		if applied[k] == 0 || caught[k] != applied[k] {
			t.Errorf("%s: %d of %d detected", k, caught[k], applied[k])
		}
	}
	w.Close()
}

// TestBreakNames: the first broken point is named with the kind of tampering.
func TestBreakNames(t *testing.T) {
	w, path := openLog(t, false)
	for i := 0; i < 3; i++ {
		launch(t, w, fmt.Sprintf("e%d", i), "ok")
	}
	raw, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(raw), "\n")
	lines = lines[:len(lines)-1]
	write := func(t *testing.T, content string) *Report {
		dir := t.TempDir()
		p := filepath.Join(dir, "audit.log")
		_ = os.WriteFile(p, []byte(content), 0o600)
		hb, _ := os.ReadFile(HeadPath(path))
		_ = os.WriteFile(HeadPath(p), hb, 0o600)
		return verifyPath(t, p, VerifyOptions{})
	}
	cases := []struct {
		name    string
		content func() string
		kind    string
		line    int
		detail  string
	}{
		{"deleted", func() string { return strings.Join(append(append([]string{}, lines[:7]...), lines[8:]...), "") }, BreakDeleted, 8, "seq 8 follows seq 6"},
		{"edited", func() string {
			c := append([]string{}, lines...)
			c[10] = strings.Replace(c[10], `"ok":true`, `"ok":fals`, 1)
			return strings.Join(c, "")
		}, BreakEdited, 11, "edited"},
		{"swapped", func() string {
			c := append([]string{}, lines...)
			c[4], c[5] = c[5], c[4]
			return strings.Join(c, "")
		}, BreakReordered, 5, "swapped"},
		{"duplicated", func() string {
			c := append([]string{}, lines[:6]...)
			c = append(c, lines[5:]...)
			return strings.Join(c, "")
		}, BreakDuplicated, 7, "twice"},
		{"truncated mid-line", func() string { return strings.Join(lines, "")[:len(raw)-30] }, BreakTruncated, len(lines), "incomplete"},
		{"truncated at a record", func() string { return strings.Join(lines[:len(lines)-2], "") }, BreakTruncated, len(lines) - 1, "2 record(s) were removed from its end"},
		{"header deleted", func() string { return strings.Join(lines[1:], "") }, BreakHeader, 1, "not a header"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := write(t, c.content())
			b := rep.Break
			if b == nil || b.Kind != c.kind || b.Line != c.line || !strings.Contains(b.Detail, c.detail) {
				t.Fatalf("break %+v, want %s at line %d saying %q", b, c.kind, c.line, c.detail)
			}
		})
	}
	t.Run("missing head file", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "audit.log")
		_ = os.WriteFile(p, raw, 0o600)
		if b := verifyPath(t, p, VerifyOptions{}).Break; b == nil || b.Kind != BreakMissingHead {
			t.Fatalf("break %+v", b)
		}
	})
	t.Run("schema 1 log", func(t *testing.T) {
		rep := write(t, `{"v":1,"time":"2025-01-01T00:00:00Z","exec_id":"x","step":"accept"}`+"\n")
		if rep.Break == nil || rep.Break.Kind != BreakUnchained {
			t.Fatalf("break %+v", rep.Break)
		}
	})
}

func TestMissingRotatedFileNamed(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, err := Open(path, Options{RotateBytes: 2000})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 6; i++ {
		launch(t, w, fmt.Sprint(i), "ok")
	}
	w.Close()
	if err := os.Remove(filepath.Join(dir, "audit.log.2")); err != nil {
		t.Fatal(err)
	}
	rep := verifyPath(t, path, VerifyOptions{})
	if b := rep.Break; b == nil || b.Kind != BreakMissingFile || !strings.Contains(b.Detail, "audit.log.2") || b.File != "audit.log.3" {
		t.Fatalf("break %+v", rep.Break)
	}
	// --partial: an operator who pruned old files verifies what is left.
	rep = verifyPath(t, path, VerifyOptions{Partial: true})
	mustIntact(t, rep)
	if len(rep.Skipped) == 0 || !strings.Contains(strings.Join(rep.Skipped, " "), "audit.log.2") {
		t.Fatalf("skipped %v", rep.Skipped)
	}
}

func TestRestartClosesInterruptedExecs(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, err := Open(path, Options{Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	launch(t, w, "done", "ok")
	launch(t, w, "lost", "open")
	launch(t, w, "lost2", "open")
	crash(w)

	w, err = Open(path, Options{Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	info := w.Opened()
	if info.State != "continued" || info.PreviousShutdown != "unclean" || strings.Join(info.Interrupted, ",") != "lost,lost2" {
		t.Fatalf("opened %+v", info)
	}
	w.Close()
	var recs []Record
	rep := verifyPath(t, path, VerifyOptions{Visit: func(_ string, _ int, r Record) { recs = append(recs, r) }})
	mustIntact(t, rep)
	if rep.Interrupted != 2 || len(rep.Open) != 0 || rep.Ran != 1 {
		t.Fatalf("report %+v", rep)
	}
	var tail []string
	for _, r := range recs[len(recs)-4:] {
		tail = append(tail, r.Step+":"+r.ExecID)
	}
	if strings.Join(tail, " ") != "start: interrupted:lost interrupted:lost2 stop:" {
		t.Fatalf("records after restart: %v", tail)
	}
	ir := recs[len(recs)-3]
	if ir.OK || ir.Source != SourceSupervisor || ir.CallerUID != 1000 || ir.CallerPID != 4242 || ir.FactMap()["last_step"] != StepExec || ir.Error == "" {
		t.Fatalf("interrupted record %+v", ir)
	}
	if recs[len(recs)-4].FactMap()["previous_shutdown"] != "unclean" {
		t.Fatalf("start record %+v", recs[len(recs)-4])
	}

	// A clean stop leaves nothing to interrupt.
	w, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if info := w.Opened(); info.PreviousShutdown != "clean" || len(info.Interrupted) != 0 {
		t.Fatalf("opened %+v", info)
	}
	w.Close()
}

// TestOpenInFlightAcrossRotation: an exec accepted before a rotation and
// never reaped is still closed after a restart.
func TestOpenInFlightAcrossRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, err := Open(path, Options{RotateBytes: 1500})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(Record{ExecID: "long", Step: StepAccept, OK: true, Source: SourceSupervisor}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		launch(t, w, fmt.Sprint(i), "ok")
	}
	crash(w)
	w, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Opened().Interrupted; len(got) != 1 || got[0] != "long" {
		t.Fatalf("interrupted %v", got)
	}
	w.Close()
	mustIntact(t, verifyPath(t, path, VerifyOptions{}))
}

func TestBrokenLogIsSetAsideAndLinked(t *testing.T) {
	for _, c := range []struct {
		name   string
		tamper func(t *testing.T, path string)
		kind   string
	}{
		{"edited", func(t *testing.T, path string) {
			raw, _ := os.ReadFile(path)
			_ = os.WriteFile(path, bytes.Replace(raw, []byte(`"exit_code":0`), []byte(`"exit_code":1`), 1), 0o600)
		}, BreakEdited},
		{"tail removed", func(t *testing.T, path string) {
			raw, _ := os.ReadFile(path)
			lines := bytes.SplitAfter(raw, []byte("\n"))
			_ = os.WriteFile(path, bytes.Join(lines[:len(lines)-4], nil), 0o600)
		}, BreakTruncated},
		{"torn last line", func(t *testing.T, path string) {
			raw, _ := os.ReadFile(path)
			_ = os.WriteFile(path, raw[:len(raw)-10], 0o600)
		}, BreakTruncated},
		{"head file removed", func(t *testing.T, path string) { _ = os.Remove(HeadPath(path)) }, BreakHead},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "audit.log")
			w, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			launch(t, w, "a", "ok")
			launch(t, w, "b", "ok")
			w.Close()
			c.tamper(t, path)
			before, _ := os.ReadFile(path)

			w, err = Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			info := w.Opened()
			if info.State != "set-aside" || info.SetAside != "audit.log.1" || info.Break == nil || info.Break.Kind != c.kind {
				t.Fatalf("opened %+v (break %v)", info, info.Break)
			}
			launch(t, w, "c", "ok")
			w.Close()
			// The evidence is kept byte for byte.
			if after, _ := os.ReadFile(filepath.Join(dir, "audit.log.1")); !bytes.Equal(after, before) {
				t.Fatal("the broken log was changed")
			}
			rep := verifyPath(t, path, VerifyOptions{})
			if rep.Break == nil || rep.Break.File != "audit.log.1" || rep.Break.Kind != c.kind {
				t.Fatalf("verify after the set-aside: %+v", rep.Break)
			}
			rep = verifyPath(t, path, VerifyOptions{Partial: true})
			mustIntact(t, rep)
			if len(rep.Skipped) == 0 || len(rep.Files) != 1 {
				t.Fatalf("partial: %+v", rep)
			}
			var hdr Record
			raw, _ := os.ReadFile(path)
			_ = json.Unmarshal(raw[:bytes.IndexByte(raw, '\n')], &hdr)
			if hdr.OK || !strings.Contains(hdr.Error, "audit.log.1") || hdr.FactMap()["reason"] != reasonBroken || hdr.FactMap()["prev_file"] != "audit.log.1" {
				t.Fatalf("new header %+v", hdr)
			}
		})
	}
}

func TestMissingLogWithHead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, _ := Open(path, Options{})
	launch(t, w, "a", "ok")
	w.Close()
	_ = os.Remove(path)
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Opened().State != "missing" {
		t.Fatalf("%+v", w.Opened())
	}
	w.Close()
	if b := verifyPath(t, path, VerifyOptions{}).Break; b == nil || b.Kind != BreakMissingFile {
		t.Fatalf("break %+v", b)
	}
	mustIntact(t, verifyPath(t, path, VerifyOptions{Partial: true}))
}

// TestRotationFinishedAfterCrash: a supervisor that died between renaming
// the full file and creating the next one leaves a chain the next one
// completes.
func TestRotationFinishedAfterCrash(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	w, _ := Open(path, Options{})
	launch(t, w, "a", "ok")
	w.mu.Lock()
	name, _, _ := w.nextRotatedName()
	if _, err := w.appendLocked(w.selfRecord(StepRotate, map[string]any{"reason": reasonSize, "renamed_to": name}), false, false); err != nil {
		t.Fatal(err)
	}
	_ = os.Rename(path, filepath.Join(dir, name))
	w.mu.Unlock()
	crash(w)
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Opened().State != "rotation-finished" {
		t.Fatalf("%+v", w.Opened())
	}
	launch(t, w, "b", "ok")
	w.Close()
	rep := verifyPath(t, path, VerifyOptions{})
	mustIntact(t, rep)
	if len(rep.Files) != 2 {
		t.Fatalf("files %+v", rep.Files)
	}
}

// TestHeadBehindIsAccepted: records after the one the head file names are
// accepted (a write in progress, or records a crash left before their sync
// and head update), but a head that names another record, or one past the
// end, is a break.
func TestHeadBehindIsAccepted(t *testing.T) {
	w, path := openLog(t, false)
	launch(t, w, "a", "ok")
	old, _ := os.ReadFile(HeadPath(path))
	for _, step := range []string{StepAccept, StepDecide} {
		if err := w.Write(Record{ExecID: "b", Step: step, OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	current, _ := os.ReadFile(HeadPath(path))
	_ = os.WriteFile(HeadPath(path), old, 0o600)
	rep := verifyPath(t, path, VerifyOptions{})
	mustIntact(t, rep)
	if len(rep.Notes) == 0 || !strings.Contains(rep.Notes[0], "2 record(s)") {
		t.Fatalf("notes %v", rep.Notes)
	}
	h, _ := parseHead(current)
	h.Hash = strings.Repeat("0", 64)
	_ = os.WriteFile(HeadPath(path), encodeHead(h), 0o600)
	if b := verifyPath(t, path, VerifyOptions{}).Break; b == nil || b.Kind != BreakHead {
		t.Fatalf("a head naming another record: %+v", b)
	}
	h, _ = parseHead(current)
	h.Seq += 3
	_ = os.WriteFile(HeadPath(path), encodeHead(h), 0o600)
	if b := verifyPath(t, path, VerifyOptions{}).Break; b == nil || b.Kind != BreakTruncated {
		t.Fatalf("a head past the end: %+v", b)
	}
}

// TestGroupCommit: concurrent writers with fsync all return durable
// records, the chain is intact and the head names the last one.
func TestGroupCommit(t *testing.T) {
	w, path := openLog(t, true)
	done := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func(g int) {
			for i := 0; i < 25; i++ {
				if err := w.Write(Record{ExecID: fmt.Sprint(g), Step: StepExec, Facts: map[string]any{"i": i}}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	rep := verifyPath(t, path, VerifyOptions{})
	mustIntact(t, rep)
	if len(rep.Notes) != 0 || rep.Records != 2+200 {
		t.Fatalf("after every Write returned, the head names the last record: %+v", rep)
	}
}

func TestSecondWriterRefused(t *testing.T) {
	w, path := openLog(t, false)
	if _, err := Open(path, Options{}); err == nil || !strings.Contains(err.Error(), "another process") {
		t.Fatalf("second writer: %v", err)
	}
	w.Close()
	w2, err := Open(path, Options{})
	if err != nil {
		t.Fatalf("after the first closed: %v", err)
	}
	w2.Close()
}

func TestWriteFailureIsSticky(t *testing.T) {
	w, _ := openLog(t, false)
	w.mu.Lock()
	w.f.Close() // the disk goes away under the writer
	w.mu.Unlock()
	if err := w.Write(Record{ExecID: "a", Step: StepAccept}); err == nil {
		t.Fatal("write to a closed file succeeded")
	}
	err := w.Write(Record{ExecID: "b", Step: StepAccept})
	if err == nil || !strings.Contains(err.Error(), "unusable since an earlier failure") {
		t.Fatalf("second write: %v", err)
	}
}

func TestReservedStepsRefused(t *testing.T) {
	w, path := openLog(t, false)
	for _, step := range []string{StepHeader, StepStart, StepStop, StepRotate, StepInterrupted} {
		if err := w.Write(Record{ExecID: "x", Step: step}); err == nil {
			t.Errorf("Write accepted a %s record", step)
		}
	}
	mustIntact(t, verifyPath(t, path, VerifyOptions{}))
}

func TestTerminal(t *testing.T) {
	for _, c := range []struct {
		r    Record
		want bool
	}{
		{Record{Step: StepAccept, OK: true}, false},
		{Record{Step: StepAccept, OK: false}, true},
		{Record{Step: StepDecide, OK: false}, true},
		{Record{Step: StepPrepare, OK: false}, true},
		{Record{Step: StepExec, OK: false}, false}, // the reap follows
		{Record{Step: StepReap, OK: false}, true},
		{Record{Step: StepReap, OK: true}, true},
		{Record{Step: StepInterrupted}, true},
	} {
		if got := Terminal(c.r); got != c.want {
			t.Errorf("Terminal(%s ok=%v) = %v", c.r.Step, c.r.OK, got)
		}
	}
}

func TestOpenExecsOrder(t *testing.T) {
	l := openList(map[string]*OpenExec{"b": {ExecID: "b", LastSeq: 9}, "a": {ExecID: "a", LastSeq: 3}})
	if !sort.SliceIsSorted(l, func(i, j int) bool { return l[i].LastSeq < l[j].LastSeq }) || l[0].ExecID != "a" {
		t.Fatalf("%+v", l)
	}
}

// Facts that are not as the step's type says are fact errors of verify,
// apart from the chain; the writer's own check at start-up ignores them, so
// such a record never makes the supervisor set its log aside.
func TestFactErrors(t *testing.T) {
	w, path := openLog(t, false)
	good := &facts.Exec{Argv: []string{"bwrap", "--"}, BwrapEnv: []string{"PATH=/usr/bin"}, MountsSHA256: "m", ProfileSHA256: "p", HelperVersion: "v", CodeSHA256: "c"}
	for _, r := range []Record{
		{ExecID: "a", Step: StepExec, Source: SourceNsinit, OK: true, Facts: good},
		{ExecID: "b", Step: StepExec, Source: SourceNsinit, OK: true, Facts: map[string]any{"argv": []string{"bwrap"}}},
		{ExecID: "c", Step: StepReap, OK: true, Facts: map[string]any{"exit_code": 0, "colour": "red"}},
		{ExecID: "d", Step: "session.create", OK: true, Facts: map[string]any{"anything": 1}}, // typed too: checked
		{ExecID: "e", Step: StepEnter, Source: SourceNsinit, OK: true, Facts: json.RawMessage(`{"exec_id":7}`)},
	} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep := verifyPath(t, path, VerifyOptions{})
	mustIntact(t, rep)
	if rep.Valid() || rep.FactErrorCount != 4 || len(rep.FactErrors) != 4 {
		t.Fatalf("fact errors %d %+v", rep.FactErrorCount, rep.FactErrors)
	}
	for i, want := range []string{"exec facts: missing bwrap_env, mounts_sha256", `reap facts: unknown fact "colour"`,
		`session.create facts: unknown fact "anything"`, `enter facts: fact "exec_id": json: cannot unmarshal number`} {
		if e := rep.FactErrors[i]; !strings.Contains(e.Detail, want) || e.Line < 2 || e.File != "audit.log" {
			t.Errorf("fact error %d: %+v, want %q", i, e, want)
		}
	}
	w2, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if w2.opened.State != "continued" || w2.opened.Break != nil {
		t.Fatalf("a log with fact errors was not continued: %+v", w2.opened)
	}
}

// kernelLaunch writes a session kernel's launch records: no accept of its
// own (its execs have theirs), prepare first; reaped unless open.
func kernelLaunch(t *testing.T, w Sink, id string, open bool) {
	t.Helper()
	steps := []string{StepPrepare, StepEnter, StepNetwork, StepSeccomp, StepDrop, StepExec}
	if !open {
		steps = append(steps, StepReap)
	}
	for _, s := range steps {
		r := Record{ExecID: id, Step: s, OK: true, Source: SourceSupervisor, CallerUID: 1000, CallerGID: 1000, CallerPID: 4242}
		if s == StepPrepare {
			r.Facts = map[string]any{"kernel": "session"}
		}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
}

// A kernel that was running when its supervisor died has no reap: the
// next supervisor closes its trail as it closes an exec's.
func TestRestartClosesInterruptedKernels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := Open(path, Options{Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	kernelLaunch(t, w, "k-ended", false)
	kernelLaunch(t, w, "k-running", true)
	launch(t, w, "in-kernel", "ok")
	crash(w)

	w, err = Open(path, Options{Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.Opened().Interrupted, ","); got != "k-running" {
		t.Fatalf("interrupted %q, want the running kernel only", got)
	}
	w.Close()
	var last Record
	rep := verifyPath(t, path, VerifyOptions{Visit: func(_ string, _ int, r Record) {
		if r.Step == StepInterrupted {
			last = r
		}
	}})
	mustIntact(t, rep)
	if rep.Interrupted != 1 || rep.Launches != 2 || rep.Execs != 1 || rep.Ran != 1 || len(rep.Open) != 0 {
		t.Fatalf("report %+v", rep)
	}
	f := last.FactMap()
	if last.ExecID != "k-running" || last.OK || f["kernel"] != true || f["last_step"] != StepExec || !strings.HasPrefix(last.Error, "supervisor restarted") {
		t.Fatalf("interrupted record %+v", last)
	}
}
