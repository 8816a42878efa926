package integration

import (
	"archive/zip"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// envInstallation registers the environments as make install does
// (scripts/environments.sh) in a helper config of their own, so the other
// tests of the shared installation keep running without environments, and
// starts a supervisor on it. It returns the supervisor and the tree.
func envInstallation(t *testing.T) (*supervisor, string) {
	t.Helper()
	return envInstallationWith(t, supervisorOpts{})
}

// envInstallationWith is envInstallation with more supervisor options (the
// helper and its config are the environments' own).
func envInstallationWith(t *testing.T, o supervisorOpts) (*supervisor, string) {
	t.Helper()
	in := setup(t)
	cfgPath := in.path("etc/nsinit-envs.json")
	if err := writeJSON(cfgPath, in.helperConfig()); err != nil {
		t.Fatal(err)
	}
	if err := in.buildHelper("nsinit-envs", cfgPath, true); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(in.repo, "scripts/environments.sh"), in.path("bin/sandboxctl"), cfgPath, in.prefix)
	cmd.Dir = in.repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("environments.sh: %v\n%s", err, out)
	}
	o.helper, o.extra = "nsinit-envs", append(o.extra, "--helper-config", cfgPath)
	s := in.startSupervisor(t, o)
	return s, in.path("lib/sandboxd/env/python-datascience")
}

func environments(t *testing.T, s *supervisor) map[string]api.Environment {
	t.Helper()
	status, body := s.do("GET", "/v1/environments", nil)
	var list api.EnvironmentList
	if err := json.Unmarshal(body, &list); status != 200 || err != nil {
		t.Fatalf("GET /v1/environments: %d %s %v", status, body, err)
	}
	out := map[string]api.Environment{}
	for _, e := range list.Environments {
		out[e.Name] = e
	}
	return out
}

func artifact(t *testing.T, r execResult, path string) []byte {
	t.Helper()
	for _, a := range r.Artifacts {
		if a.Path == path {
			b, err := base64.StdEncoding.DecodeString(a.ContentBase64)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("no artifact %s in %+v (stderr %s)", path, r.Artifacts, r.Stderr)
	return nil
}

// zipEntry returns one part of a zip file, or with name "" all of them.
func zipEntry(t *testing.T, b []byte, name string) string {
	t.Helper()
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("not a zip: %v", err)
	}
	var all strings.Builder
	for _, f := range zr.File {
		if name == "" || f.Name == name {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(rc)
			rc.Close()
			if name != "" {
				return buf.String()
			}
			all.WriteString(buf.String())
		}
	}
	if name == "" {
		return all.String()
	}
	t.Fatalf("no %s in the zip", name)
	return ""
}

// TestEnvironmentsDataScience runs the data-science stack through the API
// in python-datascience (the python default) and checks each output by
// content, the attestation, and that nothing is written to the workspace.
func TestEnvironmentsDataScience(t *testing.T) {
	s, _ := envInstallation(t)
	envs := environments(t, s)
	ds, ok := envs["python-datascience"]
	if !ok || !ds.Default || ds.Language != "python" || len(ds.Packages) < 15 || envs["minimal"].Language != "python" {
		t.Fatalf("environments: %+v", envs)
	}
	run := func(t *testing.T, code string, artifacts ...string) execResult {
		t.Helper()
		req := py(code)
		req["timeout_ms"] = 60000
		if len(artifacts) > 0 {
			req["artifacts"] = artifacts
		}
		r := s.exec(req)
		if r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("exit %v\nstdout %s\nstderr %s", r.ExitCode, r.Stdout, r.Stderr)
		}
		if r.Policy.Environment == nil || r.Policy.Environment.Name != "python-datascience" || r.Policy.Environment.Digest != ds.Digest {
			t.Fatalf("attestation %+v, want python-datascience %s", r.Policy.Environment, ds.Digest)
		}
		return r
	}
	t.Run("excel", func(t *testing.T) {
		r := run(t, `
import pandas as pd
df = pd.DataFrame({"city": ["東京", "서울", "北京"], "sales": [1.5, 2.25, 3.0]})
df.to_excel("/workspace/out.xlsx", index=False, engine="openpyxl")
back = pd.read_excel("/workspace/out.xlsx", engine="openpyxl")
print(back.to_json(orient="records", force_ascii=False))
`, "out.xlsx")
		if got := strings.TrimSpace(r.Stdout); got != `[{"city":"東京","sales":1.5},{"city":"서울","sales":2.25},{"city":"北京","sales":3.0}]` {
			t.Fatalf("read back %s", got)
		}
		// openpyxl 3.0 writes inline strings as character references.
		sheet := zipEntry(t, artifact(t, r, "out.xlsx"), "xl/worksheets/sheet1.xml")
		if !strings.Contains(sheet, "<t>&#49436;&#50872;</t>") || !strings.Contains(sheet, "<v>2.25</v>") {
			t.Fatalf("the xlsx does not hold the data: %.2000s", sheet)
		}
	})
	t.Run("docx", func(t *testing.T) {
		r := run(t, `
import docx
d = docx.Document()
d.add_heading("季度报告", 0)
d.add_paragraph("sandboxd wrote this paragraph.")
d.save("/workspace/r.docx")
`, "r.docx")
		doc := zipEntry(t, artifact(t, r, "r.docx"), "word/document.xml")
		if !strings.Contains(doc, "季度报告") || !strings.Contains(doc, "sandboxd wrote this paragraph.") {
			t.Fatalf("document.xml %s", doc)
		}
	})
	t.Run("pdf", func(t *testing.T) {
		r := run(t, `
from reportlab.pdfgen import canvas
c = canvas.Canvas("/workspace/r.pdf")
c.drawString(72, 720, "Invoice 4711 total 99.50")
c.save()
import pypdf
print(pypdf.PdfReader("/workspace/r.pdf").pages[0].extract_text())
`, "r.pdf")
		if !strings.Contains(r.Stdout, "Invoice 4711 total 99.50") || !bytes.HasPrefix(artifact(t, r, "r.pdf"), []byte("%PDF-")) {
			t.Fatalf("pdf text %q", r.Stdout)
		}
	})
	t.Run("sklearn", func(t *testing.T) {
		r := run(t, `
import numpy as np
from sklearn.linear_model import LinearRegression
X = np.arange(20, dtype=float).reshape(-1, 1)
m = LinearRegression().fit(X, 3 * X.ravel() + 7)
print(f"{m.coef_[0]:.4f} {m.intercept_:.4f} {m.score(X, 3 * X.ravel() + 7):.4f}")
`)
		if got := strings.TrimSpace(r.Stdout); got != "3.0000 7.0000 1.0000" {
			t.Fatalf("fit %q", got)
		}
	})
	t.Run("seaborn", func(t *testing.T) {
		r := run(t, `
import os, seaborn as sns, pandas as pd, matplotlib.pyplot as plt
df = pd.DataFrame({"x": [1, 2, 3, 4], "y": [2, 4, 1, 3]})
ax = sns.barplot(data=df, x="x", y="y")
ax.figure.set_size_inches(4, 3)
ax.figure.savefig("/workspace/bar.png", dpi=100)
print(len(ax.patches), sorted(os.listdir("/workspace")))
`, "bar.png")
		if got := strings.TrimSpace(r.Stdout); got != "4 ['bar.png']" {
			t.Fatalf("seaborn %q (the workspace must hold only the chart: no matplotlib cache or config)", got)
		}
		img, err := png.Decode(bytes.NewReader(artifact(t, r, "bar.png")))
		if err != nil || img.Bounds().Dx() != 400 || img.Bounds().Dy() != 300 {
			t.Fatalf("png: %v %v", err, img)
		}
		if strings.Contains(r.Stderr, "temporary config/cache directory") || strings.Contains(r.Stderr, "Matplotlib is building the font cache") {
			t.Fatalf("matplotlib had no usable prebuilt cache: %s", r.Stderr)
		}
	})
}

// cjkChart renders a chart titled 销售额（万元） with Japanese and Korean tick
// labels; reset puts rcParams back to matplotlib's own defaults (DejaVu
// Sans) first, so the second render must warn about missing glyphs.
func cjkChart(reset bool) string {
	pre := ""
	if reset {
		pre = "matplotlib.rcdefaults()\n"
	}
	return `
import logging, warnings, matplotlib
` + pre + `import matplotlib.pyplot as plt
from matplotlib import font_manager
fig, ax = plt.subplots(figsize=(4, 3))
ax.bar([0, 1, 2], [3, 5, 2])
ax.set_title("销售额（万元）")
ax.set_xticks([0, 1, 2], ["東京", "서울", "大阪"])
fig.savefig("/workspace/cjk.png", dpi=80)
print(font_manager.findfont(font_manager.FontProperties(family=matplotlib.rcParams["font.family"])))
`
}

// TestEnvironmentsCJK: CJK renders with no code in the payload; without the
// environment's configuration the same chart warns (so the test can fail).
func TestEnvironmentsCJK(t *testing.T) {
	s, _ := envInstallation(t)
	for _, tc := range []struct {
		name        string
		reset       bool
		wantMissing bool
	}{{"configured", false, false}, {"rcdefaults", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			req := py(cjkChart(tc.reset))
			req["artifacts"] = []string{"cjk.png"}
			req["timeout_ms"] = 60000
			r := s.exec(req)
			if r.ExitCode == nil || *r.ExitCode != 0 {
				t.Fatalf("exit %v: %s", r.ExitCode, r.Stderr)
			}
			if _, err := png.Decode(bytes.NewReader(artifact(t, r, "cjk.png"))); err != nil {
				t.Fatal(err)
			}
			missing := strings.Contains(r.Stderr, "missing from")
			if missing != tc.wantMissing {
				t.Fatalf("glyph-missing warning %v, want %v; stderr:\n%s", missing, tc.wantMissing, r.Stderr)
			}
			font := strings.TrimSpace(r.Stdout)
			if cjk := strings.Contains(font, "NotoSansCJK"); cjk == tc.reset {
				t.Fatalf("findfont resolved %q (reset %v)", font, tc.reset)
			}
			if !tc.reset && strings.TrimSpace(r.Stderr) != "" {
				t.Fatalf("stderr not empty: %s", r.Stderr)
			}
		})
	}
}

// TestEnvironmentsTampered: a tree changed after registration is refused
// with 503 and the reason, by the helper's per-launch check; minimal still
// runs.
func TestEnvironmentsTampered(t *testing.T) {
	s, tree := envInstallation(t)
	if r := s.exec(py("print(1)")); r.ExitCode == nil || *r.ExitCode != 0 {
		t.Fatalf("before: %+v", r)
	}
	rc := filepath.Join(tree, "matplotlib/matplotlibrc")
	b, err := os.ReadFile(rc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rc, append(b, "font.family: serif\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	status, body := s.do("POST", "/v1/exec", py("print(1)"))
	if status != 503 || !strings.Contains(string(body), "modified after registration") || !strings.Contains(string(body), "matplotlibrc") {
		t.Fatalf("tampered: %d %s", status, body)
	}
	// Health and doctor say so.
	status, body = s.do("GET", "/v1/health", nil)
	var h api.Health
	if err := json.Unmarshal(body, &h); err != nil {
		t.Fatalf("health: %d %s", status, body)
	}
	var seen bool
	for _, e := range h.Environments {
		if e.Name == "python-datascience" {
			seen = true
			if !strings.Contains(e.Status, "modified after registration") {
				t.Fatalf("health environment %+v", e)
			}
		}
	}
	if !seen {
		t.Fatalf("health lists no python-datascience: %s", body)
	}
	doc := exec.Command(s.in.path("bin/sandboxctl"), "doctor", "--json", "--helper-config", s.in.path("etc/nsinit-envs.json"), "--socket", s.socket)
	out, _ := doc.Output() // exits non-zero: a check fails
	var rep struct {
		Checks []struct{ Name, Status, Detail, Fix string }
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("doctor: %v\n%s", err, out)
	}
	found := false
	for _, c := range rep.Checks {
		if c.Name == "environment.python-datascience" {
			found = true
			if c.Status != "fail" || !strings.Contains(c.Detail, "modified after registration") || !strings.Contains(c.Detail, "matplotlibrc") {
				t.Fatalf("doctor: %+v", c)
			}
		}
	}
	if !found {
		t.Fatalf("doctor has no environment check:\n%s", out)
	}

	req := py("print(2)")
	req["environment"] = "minimal"
	if r := s.exec(req); strings.TrimSpace(r.Stdout) != "2" || r.Policy.Environment == nil || r.Policy.Environment.Name != "minimal" {
		t.Fatalf("minimal: %+v", r)
	}
	req["environment"] = "no-such-env"
	if status, body := s.do("POST", "/v1/exec", req); status != 400 || !strings.Contains(string(body), "not configured") {
		t.Fatalf("unknown: %d %s", status, body)
	}
}
