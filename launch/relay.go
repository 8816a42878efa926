package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// helperSteps is the permit table of the helper's reports: the steps in the
// only order the helper may report them, each exactly once. The supervisor
// gives the helper no other way to say what it did, so a stream that
// deviates -- a step skipped, repeated or reordered, an unknown step, a
// report after the sequence ended, a line that is not a report -- means a
// helper that is not the one installed, or one that misbehaves, and the
// launch is refused. OpenSSH's monitor (monitor.c, the MON_ONCE permits of
// mon_dispatch) is the model.
var helperSteps = facts.HelperSteps

// maxReportLine bounds one report line; a longer one is a violation.
const maxReportLine = facts.MaxReport

// permits is the state of the permit table for one helper.
type permits struct {
	next  int  // index in helperSteps of the one step permitted next
	ended bool // a failed step or the exec step ended the sequence
}

func stepIndex(step string) int {
	for i, s := range helperSteps {
		if s == step {
			return i
		}
	}
	return -1
}

// check admits r or says why the sequence is broken. A failure may name a
// step after the one expected (the C prelude records its own failed step,
// "enter" or "drop", before any report of the Go part), never one before
// it: a failure ends the sequence either way.
func (p *permits) check(r spec.Report) error {
	i := stepIndex(r.Step)
	switch {
	case p.ended:
		return fmt.Errorf("report of step %q after the helper's sequence had ended", r.Step)
	case i < 0:
		return fmt.Errorf("report of unknown step %q", r.Step)
	case r.OK && i != p.next:
		return fmt.Errorf("step %q reported done out of order: the next permitted step is %q (order: enter, network, seccomp, drop, exec, each once)", r.Step, helperSteps[p.next])
	case !r.OK && i < p.next:
		return fmt.Errorf("step %q reported failed after it had been reported done", r.Step)
	}
	p.next = i + 1
	p.ended = !r.OK || i == len(helperSteps)-1
	return nil
}

// done reports whether the helper reported every step done: only then has
// it exec'd bwrap under the confinement it attested.
func (p *permits) done() bool { return p.next == len(helperSteps) && p.ended }

// decodeReport decodes one report line strictly (spec.ParseReport: one
// JSON object of spec.Report's fields, nothing after it, and facts that
// are exactly the typed facts of audit/facts for its step).
func decodeReport(line []byte) (spec.Report, facts.Helper, error) {
	rep, f, err := spec.ParseReport(line)
	if err != nil {
		return rep, nil, err
	}
	if rep.Step == "" {
		return rep, nil, errors.New("report without a step")
	}
	return rep, f, nil
}

// relayed is what relayReports read from the helper.
type relayed struct {
	reports []spec.Report
	// exec is the typed facts of the helper's "exec" report when the whole
	// sequence was permitted and done; the attestation is taken from them.
	exec *facts.Exec
	// violation is the first break of the permit sequence, if any.
	violation error
}

// relayReports reads the helper's step reports (fd 4) to EOF, records
// each (into the audit trail) and checks it against the permit table
// (phase "relay"; runc's logs.ForwardLogs is the model). The first
// violation is also sent on hp.violation at once, so supervise stops the
// helper without waiting for it to finish.
func (hp *helperProc) relayReports(record func(spec.Report)) {
	go func() {
		// A long-lived sandbox's execs attest it while it runs
		// (Sandbox.ExecFacts): the exec report's facts are kept as soon as
		// the permit sequence is done, long before the pipe's EOF (the
		// helper exits with the sandbox); at EOF, what the whole stream
		// allowed (nil after a violation).
		out := relay(hp.pipes.reportR, record, hp.violation, hp.attested.Store)
		hp.attested.Store(out.exec)
		hp.reports <- out
	}()
}

func relay(r io.Reader, record func(spec.Report), violation chan<- error, attested func(*facts.Exec)) relayed {
	var out relayed
	var p permits
	var last facts.Helper
	broke := func(err error) {
		if out.violation == nil {
			out.violation = err
			violation <- err // buffered 1, sent once
		}
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxReportLine)
	for sc.Scan() {
		rep, f, err := decodeReport(sc.Bytes())
		last = f
		if err != nil {
			rep = spec.Report{Step: "unknown", Error: fmt.Sprintf("undecodable helper report: %v", err)}
			broke(fmt.Errorf("undecodable report line (%d bytes): %w", len(sc.Bytes()), err))
		} else if err := p.check(rep); err != nil {
			broke(err)
		}
		out.reports = append(out.reports, rep)
		record(rep)
		if ex, ok := f.(*facts.Exec); ok && out.violation == nil && p.done() && attested != nil {
			attested(ex)
		}
	}
	if err := sc.Err(); err != nil {
		broke(fmt.Errorf("report stream unreadable: %w", err))
		// Keep reading to EOF, so a helper writing without end never
		// blocks on a full pipe; it is being killed anyway.
		_, _ = io.Copy(io.Discard, r)
	}
	if out.violation == nil && p.done() {
		if ex, ok := last.(*facts.Exec); ok {
			out.exec = ex
		} else {
			broke(fmt.Errorf("the exec report carries no exec facts"))
		}
	}
	return out
}
