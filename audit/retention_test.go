package audit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writeRotating writes n exec records to a log that rotates every 4 KiB and
// keeps keep rotated files, and closes it.
func writeRotating(t *testing.T, dir string, keep, n int) {
	t.Helper()
	w, err := Open(filepath.Join(dir, "audit.log"), Options{RotateBytes: 4 << 10, RetentionFiles: keep})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		r := Record{ExecID: "e" + strings.Repeat("x", 40), Step: StepAccept, Source: SourceSupervisor, OK: false,
			Error: "refused", Facts: map[string]any{"pad": strings.Repeat("p", 200)}}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func rotatedFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "audit.log.[0-9]*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRetentionBoundsRotatedFiles is I11 for the audit log: rotated files
// beyond the retention setting are deleted, and the remaining chain still
// verifies without --partial, because a prune record in the chain names
// every deleted file.
func TestRetentionBoundsRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	writeRotating(t, dir, 2, 200) // some 12 rotations
	if got := rotatedFiles(t, dir); len(got) != 2 {
		t.Fatalf("rotated files kept: %d (%v), want 2", len(got), got)
	}
	rep, err := Verify(os.DirFS(dir), "audit.log", VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact {
		t.Fatalf("the pruned chain does not verify: %v", rep.Break)
	}
	if !strings.Contains(strings.Join(rep.Notes, "\n"), "deleted by audit retention") {
		t.Errorf("notes do not say why the chain starts late: %q", rep.Notes)
	}
	// Reopening prunes at start too, and still verifies.
	writeRotating(t, dir, 1, 1)
	if got := rotatedFiles(t, dir); len(got) != 1 {
		t.Fatalf("after reopening with retention 1: %d rotated files", len(got))
	}
	if rep, _ := Verify(os.DirFS(dir), "audit.log", VerifyOptions{}); !rep.Intact {
		t.Fatalf("after the start-up prune: %v", rep.Break)
	}
}

// TestRetentionStillCatchesARemovedFile: a rotated file deleted by anyone
// but the writer (no prune record names it) is still a missing-file break.
func TestRetentionStillCatchesARemovedFile(t *testing.T) {
	dir := t.TempDir()
	writeRotating(t, dir, 3, 200)
	files := rotatedFiles(t, dir)
	oldest := files[0]
	for _, f := range files { // Glob sorts lexically; find the lowest N
		if len(f) < len(oldest) || (len(f) == len(oldest) && f < oldest) {
			oldest = f
		}
	}
	if err := os.Remove(oldest); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(os.DirFS(dir), "audit.log", VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Intact || rep.Break.Kind != BreakMissingFile {
		t.Fatalf("a removed file not named by a prune record: intact %v, break %v; want %s", rep.Intact, rep.Break, BreakMissingFile)
	}
}

func TestRetentionZeroKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	writeRotating(t, dir, 0, 100)
	if got := rotatedFiles(t, dir); len(got) < 4 {
		t.Fatalf("retention 0 must keep every rotated file; %d left", len(got))
	}
}

// TestRefusalLimiter: one refusal record per key per interval; the rest
// are counted and the count reaches the chain, on the key's next record or
// in an aggregate record from Flush.
func TestRefusalLimiter(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var sink Memory
	l := NewRefusalLimiter(&sink, time.Second, func() time.Time { return now })
	refusal := func(uid int) Record {
		return Record{ExecID: "x", Step: StepAccept, CallerUID: uid, Facts: map[string]any{"code": "forbidden"}}
	}
	steps := []struct {
		advance time.Duration
		uid     int
		written bool
	}{
		{0, 1, true},                      // first of uid 1
		{10 * time.Millisecond, 1, false}, // held back
		{10 * time.Millisecond, 1, false}, // held back
		{0, 2, true},                      // another key has its own window
		{time.Second, 1, true},            // next window: carries the count 2
		{100 * time.Millisecond, 2, true}, // uid 2's window is over too
	}
	for i, st := range steps {
		now = now.Add(st.advance)
		got, err := l.Write(fmt.Sprint(st.uid), refusal(st.uid))
		if err != nil {
			t.Fatal(err)
		}
		if got != st.written {
			t.Fatalf("step %d: written %v, want %v", i, got, st.written)
		}
	}
	if n := len(sink.Records); n != 4 {
		t.Fatalf("records written: %d", n)
	}
	if got := sink.Records[2].FactMap()["refusals_suppressed"]; got != 2 {
		t.Fatalf("the next record of uid 1 carries refusals_suppressed=%v, want 2", got)
	}
	// A burst: 1000 refusals within one interval cost one record, then one
	// aggregate record once the interval is over.
	sink.Records = nil
	now = now.Add(time.Hour)
	for i := 0; i < 1000; i++ {
		if _, err := l.Write("7", refusal(7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(false, func() string { return "agg" }); err != nil {
		t.Fatal(err)
	}
	if len(sink.Records) != 1 {
		t.Fatalf("within the interval Flush must hold back: %d records", len(sink.Records))
	}
	now = now.Add(2 * time.Second)
	if err := l.Flush(false, func() string { return "agg" }); err != nil {
		t.Fatal(err)
	}
	if len(sink.Records) != 2 {
		t.Fatalf("1000 refusals wrote %d records; want 2 (one, then the aggregate)", len(sink.Records))
	}
	agg := sink.Records[1]
	if agg.ExecID != "agg" || agg.OK || agg.CallerUID != 7 || agg.FactMap()["refusals_suppressed"] != 999 || agg.FactMap()["aggregate"] != true {
		t.Fatalf("aggregate record: %+v", agg)
	}
}

// TestRefusalLimiterBounded: the keys tracked are bounded; a new key while
// the table is full shares the overflow window, and every refusal is still
// accounted for.
func TestRefusalLimiterBounded(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	var sink Memory
	l := NewRefusalLimiter(&sink, time.Second, func() time.Time { return now })
	const n = RefusalKeys + 500
	for i := 0; i < n; i++ {
		if _, err := l.Write(fmt.Sprintf("addr:192.0.2.%d", i), Record{ExecID: "x", Step: StepAccept, CallerUID: -1}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(l.keys); got != RefusalKeys {
		t.Fatalf("%d keys tracked, want the bound %d", got, RefusalKeys)
	}
	now = now.Add(2 * time.Second)
	if err := l.Flush(false, func() string { return "agg" }); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, r := range sink.Records {
		total++
		if k, ok := r.FactMap()["refusals_suppressed"].(int); ok {
			total += k - 1 // the aggregate stands for k refusals, not itself
		}
	}
	if total != n || len(l.keys) != 0 {
		t.Fatalf("the chain accounts for %d refusals of %d; %d keys left", total, n, len(l.keys))
	}
}
