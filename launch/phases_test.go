package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/nsinit/spec"
)

func TestPermits(t *testing.T) {
	ok := func(s string) spec.Report { return spec.Report{Step: s, OK: true} }
	fail := func(s string) spec.Report { return spec.Report{Step: s} }
	cases := []struct {
		name    string
		reports []spec.Report
		wantErr string // of the last report; "" if all pass
		done    bool
	}{
		{"whole sequence", []spec.Report{ok("enter"), ok("network"), ok("seccomp"), ok("drop"), ok("exec")}, "", true},
		{"stops early", []spec.Report{ok("enter"), ok("network")}, "", false},
		{"failure at the expected step", []spec.Report{ok("enter"), fail("network")}, "", false},
		{"prelude failure before any step", []spec.Report{fail("drop")}, "", false},
		{"skipped step", []spec.Report{ok("enter"), ok("seccomp")}, "out of order", false},
		{"repeated step", []spec.Report{ok("enter"), ok("enter")}, "out of order", false},
		{"exec first", []spec.Report{ok("exec")}, "out of order", false},
		{"failure of a passed step", []spec.Report{ok("enter"), ok("network"), fail("enter")}, "after it had been reported done", false},
		{"report after failure", []spec.Report{fail("enter"), ok("network")}, "after the helper's sequence had ended", false},
		{"report after exec", []spec.Report{ok("enter"), ok("network"), ok("seccomp"), ok("drop"), ok("exec"), ok("exec")}, "after the helper's sequence had ended", true},
		{"unknown step", []spec.Report{ok("enter"), ok("prepare")}, `unknown step "prepare"`, false},
		{"empty step", []spec.Report{ok("")}, "unknown step", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p permits
			var err error
			for i, r := range c.reports {
				if err = p.check(r); err != nil && i != len(c.reports)-1 {
					t.Fatalf("report %d (%+v): %v", i, r, err)
				}
			}
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("error %v, want %q", err, c.wantErr)
			}
			if p.done() != c.done {
				t.Fatalf("done = %v, want %v", p.done(), c.done)
			}
		})
	}
}

func TestRelay(t *testing.T) {
	line := func(s string) string { return s + "\n" }
	// rep is a well-formed report of step with every fact of its schema.
	rep := func(step string) string {
		f, _ := json.Marshal(fakeFacts(step))
		b, _ := json.Marshal(spec.Report{Step: step, OK: true, Facts: f})
		return line(string(b))
	}
	good := rep("enter") + rep("network") + rep("seccomp") + rep("drop") + rep("exec")
	cases := []struct {
		name, input, violation string
		reports                int
		exec                   bool
	}{
		{"in order", good, "", 5, true},
		{"unknown field", line(`{"step":"enter","ok":true,"extra":1}`), "undecodable", 1, false},
		{"trailing data", line(`{"step":"enter","ok":true} {}`), "data after the JSON object", 1, false},
		{"no step", line(`{"ok":true}`), `step ""`, 1, false},
		{"facts missing", line(`{"step":"network","ok":true}`), "missing mode", 1, false},
		{"not json", line(`\x1b[2J hello`), "undecodable", 1, false},
		{"line too long", line(`{"step":"enter","ok":true,"error":"`+strings.Repeat("e", maxReportLine)+`"}`) + good, "unreadable", 0, false},
		{"out of order", rep("network"), "out of order", 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var recorded int
			violation := make(chan error, 1)
			r := strings.NewReader(c.input)
			got := relay(r, func(spec.Report) { recorded++ }, violation, nil)
			if r.Len() != 0 {
				t.Fatalf("%d bytes left unread: a helper could block on a full pipe", r.Len())
			}
			if len(got.reports) != c.reports || recorded != c.reports {
				t.Fatalf("%d reports, %d recorded, want %d", len(got.reports), recorded, c.reports)
			}
			if (got.exec != nil) != c.exec {
				t.Fatalf("exec report %v, want %v", got.exec, c.exec)
			}
			if c.violation == "" {
				if got.violation != nil || len(violation) != 0 {
					t.Fatalf("violation %v", got.violation)
				}
				return
			}
			if got.violation == nil || !strings.Contains(got.violation.Error(), c.violation) {
				t.Fatalf("violation %v, want %q", got.violation, c.violation)
			}
			if sent := <-violation; sent != got.violation { //nolint:errorlint // the very error value sent must come back, not one that wraps it
				t.Fatalf("sent %v, returned %v", sent, got.violation)
			}
		})
	}
}

func TestWatchStatus(t *testing.T) {
	pid := os.Getpid()
	cases := []struct {
		name, input string
		exit        *int
		pidfd       bool
	}{
		{"child then exit", `{"child-pid": ` + itoa(pid) + "}\n" + `{"exit-code": 7}`, intp(7), true},
		{"exit only", `{"exit-code": 0}`, intp(0), false},
		{"garbage", `not json {"exit-code": 0}`, nil, false},
		{"pid zero", `{"child-pid": 0}`, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pidfd := make(chan int, 1)
			r := strings.NewReader(c.input)
			got := watch(r, pidfd)
			fd := <-pidfd
			if (fd >= 0) != c.pidfd {
				t.Fatalf("pidfd %d, want one: %v", fd, c.pidfd)
			}
			if fd >= 0 {
				closeFD(fd)
			}
			if (got.exit == nil) != (c.exit == nil) || got.exit != nil && *got.exit != *c.exit {
				t.Fatalf("exit %v, want %v", got.exit, c.exit)
			}
			if r.Len() != 0 {
				t.Fatalf("%d bytes left unread", r.Len())
			}
		})
	}
}

func TestPipesCloseOnce(t *testing.T) {
	before := openFDs(t)
	p, err := newPipes()
	if err != nil {
		t.Fatal(err)
	}
	if n := openFDs(t) - before; n != 14 {
		t.Fatalf("%d fds for seven pipes", n)
	}
	p.closeChildEnds()
	p.close(p.specW)
	p.close(p.specW) // a second close of a forgotten end is a no-op
	if p.isOpen(p.specW) || p.isOpen(p.specR) || !p.isOpen(p.releaseW) {
		t.Fatal("close must forget exactly the ends it closed, and keep the release writer")
	}
	// A fd number freed by close and reused must not be closed again by
	// closeAll.
	reuse, err := os.Open("/dev/null")
	if err != nil {
		t.Fatal(err)
	}
	defer reuse.Close()
	p.closeAll()
	if _, err := reuse.Stat(); err != nil {
		t.Fatalf("closeAll closed a reused descriptor: %v", err)
	}
	if n := openFDs(t) - before; n != 1 { // reuse
		t.Fatalf("%d fds left after closeAll", n-1)
	}
}

type meter struct {
	used int64
	err  error
}

func (m meter) Usage() (int64, error) { return m.used, m.err }

func TestQuotaCheck(t *testing.T) {
	cases := []struct {
		name string
		q    quotaCheck
		over bool
		err  bool
	}{
		{"disabled", quotaCheck{}, false, false},
		{"no limit", quotaCheck{ws: meter{used: 1 << 40}}, false, false},
		{"under", quotaCheck{ws: meter{used: 10}, limit: 10}, false, false},
		{"over", quotaCheck{ws: meter{used: 11}, limit: 10}, true, false},
		{"unmeasurable fails closed", quotaCheck{ws: meter{err: errors.New("too many entries")}, limit: 10}, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			over, err := c.q.over()
			if over != c.over || (err != nil) != c.err {
				t.Fatalf("over %v err %v, want %v %v", over, err, c.over, c.err)
			}
		})
	}
}

// TestSupervise checks the decision alone, with no process: each event
// stops it with its reason.
func TestSupervise(t *testing.T) {
	newHP := func() *helperProc {
		return &helperProc{waited: make(chan waitStatus, 1), violation: make(chan error, 1)}
	}
	t.Run("exited", func(t *testing.T) {
		hp := newHP()
		hp.waited <- waitStatus{}
		if r, _ := hp.supervise(context.Background(), time.Minute, quotaCheck{}); r != stopExited {
			t.Fatalf("stop %v", r)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		if r, _ := newHP().supervise(context.Background(), 10*time.Millisecond, quotaCheck{}); r != stopTimeout {
			t.Fatalf("stop %v", r)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(errors.New("session deleted"))
		r, err := newHP().supervise(ctx, time.Minute, quotaCheck{})
		if r != stopCancelled || err == nil || err.Error() != "session deleted" {
			t.Fatalf("stop %v %v", r, err)
		}
	})
	t.Run("permit", func(t *testing.T) {
		hp := newHP()
		hp.violation <- errors.New("out of order")
		if r, err := hp.supervise(context.Background(), time.Minute, quotaCheck{}); r != stopPermit || err == nil {
			t.Fatalf("stop %v %v", r, err)
		}
	})
	t.Run("quota unmeasurable", func(t *testing.T) {
		begin := time.Now()
		r, err := newHP().supervise(context.Background(), time.Minute, quotaCheck{ws: meter{err: errors.New("EACCES")}, limit: 1})
		if r != stopQuota || err == nil || time.Since(begin) > 5*quotaInterval {
			t.Fatalf("stop %v %v after %v", r, err, time.Since(begin))
		}
	})
	t.Run("quota under keeps waiting", func(t *testing.T) {
		r, _ := newHP().supervise(context.Background(), 3*quotaInterval, quotaCheck{ws: meter{used: 1}, limit: 2})
		if r != stopTimeout {
			t.Fatalf("stop %v", r)
		}
	})
}

func TestEncodeSpecTooLarge(t *testing.T) {
	sp := buildSpec(Request{ExecID: "x", Runtime: "python", Code: string(bytes.Repeat([]byte("a"), spec.MaxSize))}, "x")
	if _, err := encodeSpec(sp); err == nil || !strings.Contains(err.Error(), "above the helper's limit") {
		t.Fatalf("err %v", err)
	}
}

func intp(n int) *int { return &n }

func itoa(n int) string { return strconv.Itoa(n) }

func closeFD(fd int) { _ = unix.Close(fd) }

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}
