package runners

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/kernel/protocol"
)

// testLargeOutput runs code that writes 10 MiB to stdout and then waits
// for a file named "gate" in its working directory. The test creates the
// gate only after it has received all 10 MiB as stream frames: a runner
// that buffered the output until the exec ends would never get there.
func testLargeOutput(t *testing.T, lang, code string) {
	k := startKernel(t, lang)
	id := k.send(code)
	const total = 10 << 20
	got, frames := 0, 0
	deadline := time.Now().Add(120 * time.Second)
	for got < total {
		f := k.next(time.Until(deadline))
		s, ok := f.(*protocol.Stream)
		if !ok || s.ID != id || s.Name != protocol.StreamStdout {
			t.Fatalf("frame %#v while the exec streams", f)
		}
		if len(s.Data) > protocol.MaxFrameBytes/2 {
			t.Fatalf("one stream frame of %d bytes: the runner buffered", len(s.Data))
		}
		got += len(s.Data)
		frames++
	}
	if err := os.WriteFile(filepath.Join(k.dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := k.collect(id, 60*time.Second).mustOK(t)
	if got != total || r.stdout != "done\n" {
		t.Fatalf("streamed %d bytes then %q", got, r.stdout)
	}
	t.Logf("%s: 10 MiB in %d frames before the exec ended", lang, frames)
}

// The runners' frame limit must be the decoder's.
func TestRunnersFrameLimitMatchesProtocol(t *testing.T) {
	for lang, re := range map[string]*regexp.Regexp{
		"python":     regexp.MustCompile(`(?m)^MAX_FRAME_BYTES = 32 << 20\b`),
		"javascript": regexp.MustCompile(`(?m)^const MAX_FRAME_BYTES = 32 \* 1024 \* 1024;`),
	} {
		src, err := Source(lang)
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(src) || protocol.MaxFrameBytes != 32<<20 {
			t.Fatalf("%s runner's MAX_FRAME_BYTES does not match protocol.MaxFrameBytes (%d)", lang, protocol.MaxFrameBytes)
		}
	}
	if _, err := Source("ruby"); err == nil || !strings.Contains(err.Error(), "ruby") {
		t.Fatalf("Source(ruby) = %v", err)
	}
}

// The drivers below are the checks the Python and JavaScript runners share:
// one shape, each language's code.

// excCase is an exec whose exception is checked: its type, a substring of
// its message and of its traceback.
type excCase struct{ code, typ, msg, tb string }

// testExceptions runs each case in one kernel: exit 1, the exception as
// described, the error on stderr too, and (when runnerFile is set) none
// of the runner's own frames in the traceback.
func testExceptions(t *testing.T, lang, runnerFile string, cases []excCase) {
	k := startKernel(t, lang)
	for _, tc := range cases {
		r := k.exec(tc.code)
		e := r.result.Exception
		if e == nil || e.Type != tc.typ || !strings.Contains(e.Message, tc.msg) || !strings.Contains(e.Traceback, tc.tb) || r.result.ExitCode != 1 {
			t.Fatalf("%q: exit %d exception %+v", tc.code, r.result.ExitCode, e)
		}
		if runnerFile != "" && strings.Contains(e.Traceback, runnerFile) {
			t.Fatalf("traceback shows the runner's frames:\n%s", e.Traceback)
		}
		if !strings.Contains(r.stderr, tc.typ) {
			t.Fatalf("stderr lacks the error: %q", r.stderr)
		}
	}
}

// entryFailure is a code-node call that must fail with an exception of typ.
type entryFailure struct{ code, entry, typ string }

func testEntryFailures(t *testing.T, k *kernel, cases []entryFailure) {
	t.Helper()
	for _, tc := range cases {
		r := k.exec(tc.code, withEntry(tc.entry, ""))
		if r.result.Exception == nil || r.result.Exception.Type != tc.typ || r.result.ExitCode != 1 || r.result.ReturnValue != nil {
			t.Fatalf("%q: exit %d exception %+v", tc.code, r.result.ExitCode, r.result.Exception)
		}
	}
}

// testStreamOrderAndRawFDs runs code that prints "out i" and "err i" for i
// < 200 through the language's own streams, then writes "raw-out\n" and
// "raw-err\n" on fd 1 and 2 directly, then 0xff and a euro sign split over
// two writes on fd 1, then runs a child that echoes "child-out" and
// "child-err": both streams must arrive whole and in order.
func testStreamOrderAndRawFDs(t *testing.T, lang, code string) {
	k := startKernel(t, lang)
	r := k.exec(code).mustOK(t)
	var wantOut, wantErr strings.Builder
	for i := 0; i < 200; i++ {
		wantOut.WriteString("out " + strconv.Itoa(i) + "\n")
		wantErr.WriteString("err " + strconv.Itoa(i) + "\n")
	}
	wantOut.WriteString("raw-out\n\uFFFD€\nchild-out\n")
	wantErr.WriteString("raw-err\nchild-err\n")
	if r.stdout != wantOut.String() || r.stderr != wantErr.String() {
		t.Fatalf("stdout %q\nstderr %q", r.stdout, r.stderr)
	}
}

// testBackgroundOutput starts background output with start, then runs
// step 40 times: every frame must belong to the exec running when it is
// sent (protocol.Conn fails the test otherwise), nothing may come after a
// result, and the background output must arrive in some exec.
func testBackgroundOutput(t *testing.T, lang, start, step string) {
	k := startKernel(t, lang)
	k.exec(start).mustOK(t)
	seen := 0
	for i := 0; i < 40; i++ {
		r := k.exec(step).mustOK(t)
		seen += strings.Count(r.stdout, "bg ")
	}
	if seen == 0 {
		t.Fatal("the background output never arrived")
	}
}
