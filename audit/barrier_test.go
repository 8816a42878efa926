package audit

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDeferred: only a successful, non-terminal step of a launch story
// waits for a barrier.
func TestDeferred(t *testing.T) {
	cases := []struct {
		r    Record
		want bool
	}{
		{Record{Step: StepAccept, OK: true}, true},
		{Record{Step: StepDecide, OK: true}, true},
		{Record{Step: StepPrepare, OK: true}, true},
		{Record{Step: StepEnter, Source: SourceNsinit, OK: true}, true},
		{Record{Step: StepExec, Source: SourceNsinit, OK: true}, true},
		{Record{Step: StepAccept, OK: false}, false},  // a refusal is answered
		{Record{Step: StepPrepare, OK: false}, false}, // so is a failed prepare
		{Record{Step: StepEnter, Source: SourceNsinit, OK: false}, false},
		{Record{Step: StepReap, OK: true}, false}, // the answer's barrier
		{Record{Step: StepExec, Source: SourceSupervisor, OK: true}, false},
		{Record{Step: StepArtifacts, OK: true}, false},
	}
	for _, c := range cases {
		if got := Deferred(c.r); got != c.want {
			t.Errorf("Deferred(%s/%s ok=%v) = %v, want %v", c.r.Source, c.r.Step, c.r.OK, got, c.want)
		}
	}
}

// TestBarrierSyncs: with fsync, a launch story's deferred records are
// appended at once and made durable by the barrier (Sync) or the next
// synced record; the head file names only durable records; the chain
// verifies.
func TestBarrierSyncs(t *testing.T) {
	w, path := openLog(t, true)
	durable := func() uint64 {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.synced
	}
	seqNow := func() uint64 {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.seq
	}
	syncs0 := w.syncs
	for _, step := range []string{StepAccept, StepDecide, StepPrepare} {
		if err := w.Write(Record{ExecID: "e1", Step: step, OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	if durable() >= seqNow() {
		t.Fatal("deferred records were synced in Write")
	}
	if len(readLines(t, path)) != 2+3 { // header, start, the three
		t.Fatal("deferred records not appended at once")
	}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	if durable() != seqNow() || w.syncs != syncs0+1 {
		t.Fatalf("after the barrier: synced %d of %d with %d fdatasyncs", durable(), seqNow(), w.syncs-syncs0)
	}
	if err := w.Sync(); err != nil || w.syncs != syncs0+1 {
		t.Fatalf("a barrier with nothing new to sync synced again (%v)", err)
	}
	for _, step := range []string{StepEnter, StepNetwork, StepSeccomp, StepDrop, StepExec} {
		if err := w.Write(Record{ExecID: "e1", Step: step, Source: SourceNsinit, OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Write(Record{ExecID: "e1", Step: StepReap, OK: true}); err != nil {
		t.Fatal(err)
	}
	if durable() != seqNow() || w.syncs != syncs0+2 {
		t.Fatalf("after the reap: synced %d of %d with %d fdatasyncs, want one more", durable(), seqNow(), w.syncs-syncs0)
	}
	hb, err := os.ReadFile(HeadPath(path))
	if err != nil {
		t.Fatal(err)
	}
	h, err := parseHead(hb)
	if err != nil || h.Seq != seqNow()-1 {
		t.Fatalf("head %+v (%v), want the reap's seq %d", h, err, seqNow()-1)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err := Verify(os.DirFS(filepath.Dir(path)), filepath.Base(path), VerifyOptions{})
	if err != nil || !rep.Intact {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// TestSyncEveryRecord keeps the old behaviour: one fdatasync per record.
func TestSyncEveryRecord(t *testing.T) {
	w, err := Open(filepath.Join(t.TempDir(), "audit.log"), Options{Fsync: true, SyncEveryRecord: true})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s0 := w.syncs
	for _, step := range []string{StepAccept, StepDecide, StepPrepare} {
		if err := w.Write(Record{ExecID: "e1", Step: step, OK: true}); err != nil {
			t.Fatal(err)
		}
	}
	if w.syncs != s0+3 {
		t.Fatalf("%d fdatasyncs for three records", w.syncs-s0)
	}
}
