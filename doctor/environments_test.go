package doctor

import (
	"context"
	"errors"
	"io/fs"
	"path"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/nsinit/config"
)

// withDatascience installs the data-science stack and the CJK fonts on h.
func withDatascience(h *fakeHost) *fakeHost {
	for _, m := range datascienceModules {
		h.stats[path.Join(distPackages, m.module)] = FileInfo{Mode: fs.ModeDir | 0o755}
	}
	h.stats[cjkFont] = FileInfo{Mode: 0o644}
	return h
}

func TestEnvironmentChecks(t *testing.T) {
	h := healthyHost()
	ds := config.Environment{Name: "python-datascience", Language: "python", Root: "/usr/local/lib/sandboxd/env/python-datascience",
		Manifest: "/usr/local/lib/sandboxd/env/python-datascience.manifest.json", Digest: "sha256:" + strings.Repeat("a", 64), Default: true}
	h.cfg.Environments = []config.Environment{ds, {Name: "minimal", Language: "python", Digest: "sha256:" + strings.Repeat("b", 64)}}
	o := opts()
	o.VerifyEnvironment = func(config.Environment) error { return nil }
	rep := Run(context.Background(), h, o)
	if r := find(t, rep, "environment.python-datascience"); r.Status != OK || !strings.Contains(r.Detail, "re-hashed") {
		t.Fatalf("intact: %+v", r)
	}
	if r := find(t, rep, "environment.minimal"); r.Status != OK {
		t.Fatalf("minimal: %+v", r)
	}

	o.VerifyEnvironment = func(config.Environment) error {
		return errors.New("environment tree modified after registration: matplotlib/matplotlibrc is 700 bytes, registered 651")
	}
	rep = Run(context.Background(), h, o)
	if r := find(t, rep, "environment.python-datascience"); r.Status != Fail || !strings.Contains(r.Detail, "matplotlibrc") || !strings.Contains(r.Fix, "make install") || rep.OK {
		t.Fatalf("modified: %+v", r)
	}

	// The stack and the fonts missing: warnings naming the apt command.
	delete(h.stats, path.Join(distPackages, "sklearn"))
	delete(h.stats, cjkFont)
	rep = Run(context.Background(), h, o)
	if r := find(t, rep, "environment.datascience-stack"); r.Status != Warn || !strings.Contains(r.Fix, "apt-get install --no-install-recommends python3-sklearn") {
		t.Fatalf("stack: %+v", r)
	}
	if r := find(t, rep, "fonts.cjk"); r.Status != Warn || r.Fix != "as root: apt-get install fonts-noto-cjk && make install" {
		t.Fatalf("fonts: %+v", r)
	}
}
