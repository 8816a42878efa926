package integration

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLISessionExecREPL: `sandboxctl session exec` in a kernel shows
// results the way a REPL does. The value of the last expression is printed
// on stdout (streamed or not); a chart is written only with
// --artifacts-dir, which says where it went; without it, stderr says what
// was not shown.
func TestCLISessionExecREPL(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.createSession(t, map[string]any{})
	ctl := func(args ...string) (string, string, error) {
		cmd := exec.Command(in.path("bin/sandboxctl"), append([]string{"session", "exec", sess.ID, "--socket", s.socket, "--lang", "python"}, args...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		return out.String(), errb.String(), err
	}
	if out, serr, err := ctl("-c", "x = 41"); err != nil || out != "" {
		t.Fatalf("x = 41: %q %q %v", out, serr, err)
	}
	for _, stream := range []string{"--no-stream", "--stream"} {
		out, serr, err := ctl(stream, "-c", "print('first')\nx + 1")
		if err != nil || out != "first\n42\n" {
			t.Fatalf("%s: x + 1 printed %q (stderr %q, %v); want \"first\\n42\\n\"", stream, out, serr, err)
		}
		if strings.Contains(serr, "not shown") {
			t.Errorf("%s: a text result was reported as not shown: %q", stream, serr)
		}
	}
	chart := "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()"
	_, serr, err := ctl("-c", chart)
	if err != nil || !strings.Contains(serr, "image/png") || !strings.Contains(serr, "not shown; use --artifacts-dir") {
		t.Fatalf("a chart without --artifacts-dir: stderr %q, %v", serr, err)
	}
	dir := filepath.Join(t.TempDir(), "out")
	_, serr, err = ctl("--artifacts-dir", dir, "-c", chart)
	pngs, _ := filepath.Glob(filepath.Join(dir, "display-*.png"))
	if err != nil || len(pngs) != 1 || !strings.Contains(serr, "saved to "+dir+": "+filepath.Base(pngs[0])) {
		t.Fatalf("a chart with --artifacts-dir: files %v, stderr %q, %v", pngs, serr, err)
	}
	if b, err := os.ReadFile(pngs[0]); err != nil || !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("%s is not a PNG: %v", pngs[0], err)
	}
}
