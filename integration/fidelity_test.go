package integration

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// Interpreter fidelity: what code written for Jupyter-style interpreters
// expects of a kernel, through the API.

// mimeList is the MIME types of an exec's displays, in order.
func mimeList(r execResult) string {
	var out []string
	for _, d := range r.Displays {
		out = append(out, d.MIME)
	}
	return strings.Join(out, ",")
}

func displayText(t *testing.T, r execResult, i int) string {
	t.Helper()
	var s string
	if i >= len(r.Displays) || json.Unmarshal(r.Displays[i].Data, &s) != nil {
		t.Fatalf("display %d is not text: %+v", i, r.Displays)
	}
	return s
}

func TestKernelDisplayFidelity(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	t.Run("IPython.display without IPython", func(t *testing.T) {
		r := s.kexec(t, sess.ID, lang("python", `from IPython.display import display, HTML, Markdown, Image, SVG, JSON, Latex
from PIL import Image as PILImage
PILImage.new('RGB', (4, 4), 'red').save('pic.jpg')
display(HTML('<b>hi</b>'), Markdown('# Title'), Latex(r'$\alpha$'), JSON({'a': 1}))
display(SVG('<svg xmlns="http://www.w3.org/2000/svg"/>'), Image(filename='pic.jpg'))
Markdown('*last*')`))
		if !exitIs(r, 0) || mimeList(r) != "text/html,text/markdown,text/latex,application/json,image/svg+xml,image/jpeg,text/markdown" {
			t.Fatalf("displays %s: %+v", mimeList(r), r)
		}
		if displayText(t, r, 1) != "# Title" || displayText(t, r, 2) != `$\alpha$` || displayText(t, r, 6) != "*last*" {
			t.Fatalf("payloads %+v", r.Displays)
		}
		if jpg, _ := base64.StdEncoding.DecodeString(r.Displays[5].DataBase64); !strings.HasPrefix(string(jpg), "\xff\xd8\xff") {
			t.Fatalf("image/jpeg is not a JPEG: %.16q", jpg)
		}
	})
	t.Run("rich repr protocol", func(t *testing.T) {
		r := s.kexec(t, sess.ID, lang("python", `class R:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {'text/markdown': '**md**', 'application/x-unknown': 'dropped'}
    def _repr_latex_(self): return '$x$'
R()`))
		if !exitIs(r, 0) || mimeList(r) != "text/markdown,text/latex" {
			t.Fatalf("displays %s", mimeList(r))
		}
	})
	t.Run("headless show", func(t *testing.T) {
		r := s.kexec(t, sess.ID, lang("python", "from PIL import Image\nImage.new('RGB', (6, 5)).show()\n"+
			"import plotly.graph_objects as go\ngo.Figure(go.Scatter(y=[1, 2])).show()\n"+
			"import pandas as pd\ndisplay(pd.DataFrame({'a': [1]}).style)"))
		if !exitIs(r, 0) || mimeList(r) != "image/png,text/html,application/vnd.plotly.v1+json,text/html" {
			t.Fatalf("displays %s: %+v", mimeList(r), r)
		}
		if !strings.Contains(string(r.Displays[2].Data), `"scatter"`) || !strings.Contains(displayText(t, r, 3), "<table") {
			t.Fatalf("plotly %s / Styler %s", r.Displays[2].Data, r.Displays[3].Data)
		}
	})
	t.Run("javascript static imports and display types", func(t *testing.T) {
		code := "import { readFileSync } from 'fs'\nimport fs from 'node:fs'\nimport * as p from 'path'\n" +
			"display('text/markdown', '# md')\nconsole.log(typeof readFileSync, typeof fs.statSync, p.join('a', 'b'))\n"
		for i := 0; i < 2; i++ { // a cell with imports runs again
			r := s.kexec(t, sess.ID, lang("javascript", code))
			if !exitIs(r, 0) || r.Stdout != "function function a/b\n" || mimeList(r) != "text/markdown" {
				t.Fatalf("run %d: %+v", i+1, r)
			}
		}
	})
	t.Run("invalid UTF-8 and user line numbers", func(t *testing.T) {
		for _, c := range []struct {
			lang, code string
			line       *regexp.Regexp
		}{
			{"python", "import os\nos.write(1, b'a\\xffb\\n')\n\nraise ValueError('line 4')", regexp.MustCompile(`File "<exec-\d+>", line 4`)},
			{"javascript", "process.stdout.write(Buffer.from([0x61, 0xff, 0x62, 0x0a]))\n\n\nthrow new Error('line 4')", regexp.MustCompile(`exec-\d+:4:`)},
		} {
			r := s.kexec(t, sess.ID, lang(c.lang, c.code))
			if r.Stdout != "a\uFFFDb\n" || r.Exception == nil || !c.line.MatchString(r.Exception.Traceback) {
				t.Fatalf("%s: stdout %q exception %+v", c.lang, r.Stdout, r.Exception)
			}
		}
	})
}

// The run-once runner (a process-mode code-node call) has the same
// displays as a kernel.
func TestRunOnceDisplayFidelity(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	status, body := s.do("POST", "/v1/exec", map[string]any{"language": "python", "entrypoint": "main",
		"code": "from IPython.display import display, Markdown\ndef main():\n    display(Markdown('# once'))\n    return 1\n"})
	var r execResult
	if status != 200 || json.Unmarshal(body, &r) != nil || mimeList(r) != "text/markdown" || displayText(t, r, 0) != "# once" {
		t.Fatalf("status %d: %s", status, body)
	}
}

// A typescript exec is refused as a bad request, one-shot and in a session.
func TestTypeScriptIsABadRequest(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	for _, path := range []string{"/v1/exec", "/v1/sessions/" + sess.ID + "/exec"} {
		status, body := s.do("POST", path, map[string]any{"language": "typescript", "code": "const x: number = 1"})
		if status != 400 || !strings.Contains(string(body), "typescript") {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
}

// An exec's env in a kernel is set for that exec only: the next exec sees
// the kernel's own environment again.
func TestKernelExecEnv(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{})
	sess := s.kernelSession(t)
	for _, c := range []struct{ lang, show string }{
		{"python", "import os, subprocess\nprint(os.environ.get('FOO', '-'), subprocess.run(['/bin/sh', '-c', 'echo ${FOO:--}'], capture_output=True, text=True).stdout, end='')"},
		{"javascript", "console.log(process.env.FOO ?? '-', require('child_process').execFileSync('/bin/sh', ['-c', 'echo ${FOO:--}']).toString().trim())"},
	} {
		req := lang(c.lang, c.show)
		req["env"] = map[string]string{"FOO": "bar"}
		if r := s.kexec(t, sess.ID, req); !exitIs(r, 0) || r.Stdout != "bar bar\n" {
			t.Fatalf("%s with env: %+v", c.lang, r)
		}
		if r := s.kexec(t, sess.ID, lang(c.lang, c.show)); !exitIs(r, 0) || r.Stdout != "- -\n" {
			t.Fatalf("%s after the exec with env: %+v", c.lang, r)
		}
	}
}
