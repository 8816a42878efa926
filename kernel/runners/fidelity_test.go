package runners

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/kernel/protocol"
)

func withEnv(env map[string]string) execOpt { return func(e *protocol.Execute) { e.Env = env } }

// mimes lists the MIME types of a run's displays, in order.
func (r *run) mimes() string {
	var out []string
	for _, d := range r.displays {
		out = append(out, d.MIME)
	}
	return strings.Join(out, ",")
}

// testExecEnv: an exec's env is set for that exec only, for the code and
// its subprocesses; the next exec sees the kernel's own environment again
// (an added name gone, a replaced one restored), and a variable the code
// itself sets stays, like any other kernel state.
func testExecEnv(t *testing.T, lang string, show, set string) {
	k := startKernel(t, lang, "BASE=kernel")
	env := map[string]string{"FOO": "bar", "BASE": "over"}
	if r := k.exec(show, withEnv(env)).mustOK(t); r.stdout != "bar over bar over\n" {
		t.Fatalf("with env: %q", r.stdout)
	}
	k.exec(set).mustOK(t)
	if r := k.exec(show).mustOK(t); r.stdout != "- kernel - kernel\n" {
		t.Fatalf("after the exec with env: %q", r.stdout)
	}
	if r := k.exec(strings.ReplaceAll(show, "FOO", "OWN")).mustOK(t); r.stdout != "mine kernel mine kernel\n" {
		t.Fatalf("a variable the code set: %q", r.stdout)
	}
}

func TestPythonExecEnv(t *testing.T) {
	testExecEnv(t, "python", `import os, subprocess
v = lambda n: os.environ.get(n, '-')
sh = subprocess.run(['/bin/sh', '-c', 'echo "${FOO:--} ${BASE:--}"'], capture_output=True, text=True).stdout
print(v('FOO'), v('BASE'), sh, end='')`, "os.environ['OWN'] = 'mine'")
}

func TestJavaScriptExecEnv(t *testing.T) {
	testExecEnv(t, "javascript", `{
const v = (n) => process.env[n] ?? '-';
const sh = require('child_process').execFileSync('/bin/sh', ['-c', 'echo "${FOO:--} ${BASE:--}"']).toString();
process.stdout.write(v('FOO') + ' ' + v('BASE') + ' ' + sh);
}`, "process.env.OWN = 'mine'")
}

// The IPython display idiom works without IPython: each class gives its
// MIME type, from data and from a file, in a kernel and in once mode.
func TestPythonIPythonDisplayShim(t *testing.T) {
	code := `from IPython.display import display, HTML, Markdown, Image, SVG, JSON, Latex
from IPython.core.display import HTML as CoreHTML
import IPython, base64
from PIL import Image as PILImage
PILImage.new('RGB', (3, 2), 'red').save('pic.jpg')
PILImage.new('RGB', (5, 4), 'blue').save('pic.png')
display(HTML('<b>hi</b>'), Markdown('# Title'), SVG('<svg xmlns="http://www.w3.org/2000/svg"/>'))
display(JSON({'a': [1, 2]}), Latex(r'$\alpha$'), CoreHTML('<i>core</i>'))
display(Image(filename='pic.jpg'), Image(open('pic.png', 'rb').read()), Image('pic.png'))
print(IPython.get_ipython(), IPython.display.HTML is HTML)
Markdown('last *expression*')
`
	want := "text/html,text/markdown,image/svg+xml,application/json,text/latex,text/html,image/jpeg,image/png,image/png,text/markdown"
	for _, mode := range []string{ModeKernel, ModeOnce} {
		k := startKernel(t, "python", ModeEnv+"="+mode)
		r := k.exec(code).mustOK(t)
		if r.mimes() != want || r.stdout != "None True\n" {
			t.Fatalf("%s: displays %s, stdout %q", mode, r.mimes(), r.stdout)
		}
		d := r.displays
		if d[0].Text() != "<b>hi</b>" || d[1].Text() != "# Title" || string(d[3].Data) != `{"a":[1,2]}` ||
			d[4].Text() != `$\alpha$` || d[9].Text() != "last *expression*" {
			t.Fatalf("%s: payloads %+v", mode, d)
		}
		if w, h := pngSize(t, d[7].DataBase64); w != 5 || h != 4 {
			t.Fatalf("%s: PNG %dx%d, want 5x4", mode, w, h)
		}
		raw, _ := base64.StdEncoding.DecodeString(d[6].DataBase64)
		if !strings.HasPrefix(string(raw), "\xff\xd8\xff") {
			t.Fatalf("%s: image/jpeg is not a JPEG: % x", mode, raw[:min(8, len(raw))])
		}
	}
	// Libraries that look for IPython once the shim is imported (pyplot's
	// REPL hook, pandas' frontend check) take their plain path.
	k := startKernel(t, "python")
	k.exec("from IPython.display import display\nimport pandas as pd\nimport matplotlib.pyplot as plt").mustOK(t)
	r := k.exec("plt.plot([1, 2])\nplt.show()\ndisplay(pd.DataFrame({'a': [1]}))").mustOK(t)
	if r.mimes() != "text/html,text/plain,image/png" {
		t.Fatalf("pyplot and pandas beside the shim: displays %s, stderr %q", r.mimes(), r.stderr)
	}
}

// The rich-repr protocol, on the last expression and in display():
// _repr_mimebundle_ first (types the channel does not carry dropped), the
// _repr_*_ methods for the rest; a representation that is not what its
// type promises (a "PNG" without the signature) is dropped, never sent to
// break the channel, and the kernel lives on.
func TestPythonRichReprProtocol(t *testing.T) {
	k := startKernel(t, "python")
	code := `class Rich:
    def _repr_mimebundle_(self, include=None, exclude=None):
        return {'text/markdown': '**md**', 'application/vnd.jupyter.widget-view+json': {'x': 1}}, {}
    def _repr_markdown_(self): return 'not used: the bundle has it'
    def _repr_latex_(self): return '$x$'
    def _repr_json_(self): return {'k': 1}
    def _repr_html_(self): raise ValueError('broken repr')
class BadImage:
    def _repr_png_(self): return b'not a png'
    def _repr_jpeg_(self): return 'bm90IGEganBlZw=='
display(BadImage())
Rich()
`
	r := k.exec(code).mustOK(t)
	// BadImage has no valid representation: its repr, as text/plain
	if r.mimes() != "text/plain,text/markdown,text/latex,application/json" {
		t.Fatalf("displays %s", r.mimes())
	}
	if !strings.Contains(r.displays[0].Text(), "BadImage object") || r.displays[1].Text() != "**md**" || r.displays[2].Text() != "$x$" {
		t.Fatalf("payloads %s %s %s", r.displays[0].Data, r.displays[1].Data, r.displays[2].Data)
	}
	k.exec("print('alive')").mustOK(t)
}

// Headless show(): PIL's Image.show() and plotly's fig.show() become
// displays, as plt.show() does, and a pandas Styler shows as HTML.
func TestPythonHeadlessShow(t *testing.T) {
	k := startKernel(t, "python")
	r := k.exec("from PIL import Image\nImage.new('RGBA', (7, 3)).show()\nImage.new('CMYK', (2, 2)).show()").mustOK(t)
	if r.mimes() != "image/png,image/png" {
		t.Fatalf("PIL show: displays %s", r.mimes())
	}
	if w, h := pngSize(t, r.displays[0].DataBase64); w != 7 || h != 3 {
		t.Fatalf("PIL show: PNG %dx%d, want 7x3", w, h)
	}
	r = k.exec("import plotly.graph_objects as go\nfig = go.Figure(go.Bar(x=['a', 'b'], y=[1, 3]))\nfig.show()").mustOK(t)
	if r.mimes() != "text/html,application/vnd.plotly.v1+json" || !strings.Contains(r.displays[0].Text(), "plotly") {
		t.Fatalf("plotly show: displays %s", r.mimes())
	}
	var fig struct {
		Data []struct {
			Type string
			Y    []float64
		}
	}
	if err := json.Unmarshal(r.displays[1].Data, &fig); err != nil || len(fig.Data) != 1 || fig.Data[0].Type != "bar" || len(fig.Data[0].Y) != 2 {
		t.Fatalf("plotly JSON %s: %v", r.displays[1].Data, err)
	}
	r = k.exec("import pandas as pd\npd.DataFrame({'t': [3, 19]}).style.highlight_max()").mustOK(t)
	if !strings.HasPrefix(r.mimes(), "text/html") || !strings.Contains(r.displays[0].Text(), "<table") {
		t.Fatalf("Styler: displays %s", r.mimes())
	}
}

// JavaScript displays of the types beside PNG, HTML and JSON; a binary
// display whose bytes are not of its type is a TypeError in the caller's
// code, not a frame the decoder would refuse.
func TestJavaScriptDisplayTypes(t *testing.T) {
	k := startKernel(t, "javascript")
	r := k.exec(`display('image/jpeg', Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0, 16]));
display('text/markdown', '# T');
display('text/latex', '$x$');
display('application/vnd.plotly.v1+json', {data: [{type: 'bar', y: [1]}], layout: {}});
undefined`).mustOK(t)
	if r.mimes() != "image/jpeg,text/markdown,text/latex,application/vnd.plotly.v1+json" || r.displays[1].Text() != "# T" ||
		string(r.displays[3].Data) != `{"data":[{"type":"bar","y":[1]}],"layout":{}}` {
		t.Fatalf("displays %s: %+v", r.mimes(), r.displays)
	}
	r = k.exec("display('image/jpeg', Buffer.from('not a jpeg'))")
	if r.result.Exception == nil || r.result.Exception.Type != "TypeError" {
		t.Fatalf("a non-JPEG as image/jpeg: %+v", r.result.Exception)
	}
	k.exec("1").mustOK(t)
}

// Static ESM imports in a cell become dynamic imports bound at top level:
// the bindings work in the cell and in later ones, a cell with imports can
// run again, and lines after a multi-line import keep their numbers.
func TestJavaScriptStaticImports(t *testing.T) {
	k := startKernel(t, "javascript")
	cell := `import { readFileSync } from 'fs'
import fs from 'node:fs';
import * as p from 'path'
import os, { EOL as eol } from "os"
import 'node:util'
console.log(typeof readFileSync, typeof fs.statSync, p.join('a', 'b'), typeof os.cpus, JSON.stringify(eol))`
	for i := 0; i < 2; i++ {
		if r := k.exec(cell).mustOK(t); r.stdout != "function function a/b function \"\\n\"\n" {
			t.Fatalf("run %d: stdout %q stderr %q", i+1, r.stdout, r.stderr)
		}
	}
	if r := k.exec("console.log(p.sep, typeof readFileSync)").mustOK(t); r.stdout != "/ function\n" {
		t.Fatalf("bindings in the next cell: %q", r.stdout)
	}
	r := k.exec("import {\n  join,\n  basename as base\n} from 'path'\n\nthrow new Error('line 6 ' + join('x', base('/y')))")
	e := r.result.Exception
	if e == nil || e.Message != "line 6 x/y" || !regexp.MustCompile(`exec-\d+:6:`).MatchString(e.Traceback) {
		t.Fatalf("exception %+v", e)
	}
}

// Runner-level semantics other interpreters' users rely on: bytes that are
// not UTF-8 arrive as U+FFFD without failing the exec, and a traceback
// names the user's own line numbers (no wrapper offset).
func TestRunnerSemantics(t *testing.T) {
	for _, c := range []struct {
		lang, badUTF8, raise string
		line                 *regexp.Regexp
	}{
		{"python", `import os, sys
sys.stdout.buffer.write(b"a\xffb\n"); sys.stdout.flush()
os.write(2, b"\xc3(\n")`, "x = 1\n\ny = 2\nraise ValueError('on line 4')\n", regexp.MustCompile(`File "<exec-\d+>", line 4, in <module>`)},
		{"javascript", `process.stdout.write(Buffer.from([0x61, 0xff, 0x62, 0x0a]));
require('fs').writeSync(2, Buffer.from([0xc3, 0x28, 0x0a]))`, "let x = 1\n\nlet y = 2\nthrow new Error('on line 4')\n", regexp.MustCompile(`at exec-\d+:4:`)},
	} {
		k := startKernel(t, c.lang)
		r := k.exec(c.badUTF8).mustOK(t)
		if r.stdout != "a\uFFFDb\n" || r.stderr != "\uFFFD(\n" {
			t.Errorf("%s: stdout %q stderr %q", c.lang, r.stdout, r.stderr)
		}
		r = k.exec(c.raise)
		if e := r.result.Exception; e == nil || !strings.Contains(e.Message, "on line 4") || !c.line.MatchString(e.Traceback) {
			t.Errorf("%s: exception %+v", c.lang, e)
		}
	}
}
