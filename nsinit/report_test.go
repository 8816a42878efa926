package nsinit

import (
	"bufio"
	"errors"
	"os"
	"testing"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// The reporter writes each step's typed facts, stamped with t_us, in lines
// the supervisor's strict decoder (spec.ParseReport) accepts.
func TestReporterWritesTypedFacts(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rep := &reporter{f: w, start: 1}
	rep.ok(&facts.Exec{Argv: []string{"bwrap", "--"}, BwrapEnv: []string{"PATH=/usr/bin"}, MountsSHA256: "m", ProfileSHA256: "p", HelperVersion: "v", CodeSHA256: "c"})
	if st := rep.fail(&facts.Drop{Enter: &facts.Enter{ExecID: "x"}}, spec.ExitDrop, errors.New("capset"), "fix it"); st != spec.ExitDrop {
		t.Fatalf("fail returned %d", st)
	}
	w.Close()
	sc := bufio.NewScanner(r)
	var got []facts.Helper
	for sc.Scan() {
		rp, f, err := spec.ParseReport(sc.Bytes())
		if err != nil {
			t.Fatalf("%s: %v", sc.Bytes(), err)
		}
		if rp.Step != f.Step() {
			t.Fatalf("report step %s, facts of %s", rp.Step, f.Step())
		}
		got = append(got, f)
	}
	if len(got) != 2 {
		t.Fatalf("%d reports", len(got))
	}
	if x := got[0].(*facts.Exec); x.TUS <= 0 || x.Attestation().HelperVersion != "v" {
		t.Fatalf("exec facts %+v", x)
	}
	if e := facts.PreludeFailure(got[1]); e == nil || e.ExecID != "x" {
		t.Fatalf("prelude failure facts %+v", got[1])
	}
}
