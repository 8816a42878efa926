package policy

import (
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

var hashA = strings.Repeat("a", 64)

func TestPythonLock(t *testing.T) {
	for _, tc := range []struct {
		lock, err string
		n         int
	}{
		{"alpha==1.0 --hash=sha256:" + hashA + "\nBeta==2.0 \\\n  --hash=sha256:" + hashA + " --hash=sha256:" + hashA + "\n# c\n", "", 2},
		{"alpha>=1.0 --hash=sha256:" + hashA, "exact pins with hashes only", 0},
		{"alpha==1.0", "exact pins with hashes only", 0},
		{"alpha==1.0 --hash=md5:abc", "exact pins", 0},
		{"--index-url https://evil/\nalpha==1.0 --hash=sha256:" + hashA, "line 1", 0},
		{"git+https://x/y.git#egg=a", "exact pins", 0},
		{"# nothing\n", "no pins", 0},
	} {
		p, err := PythonLock([]byte(tc.lock))
		if tc.err == "" && (err != nil || len(p) != tc.n) {
			t.Errorf("%q: %v %v", tc.lock, p, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%q: got %v, want %q", tc.lock, err, tc.err)
		}
	}
}

const goodNPM = `{"name":"x","lockfileVersion":3,"requires":true,"packages":{
 "":{"name":"x","dependencies":{"is-number":"7.0.0"}},
 "node_modules/is-number":{"version":"7.0.0","resolved":"https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz","integrity":"sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZUBlbGXYxxng=="},
 "node_modules/@s/a/node_modules/is-number":{"version":"6.0.0","resolved":"https://registry.npmjs.org/is-number/-/is-number-6.0.0.tgz","integrity":"sha512-AAAA"},
 "node_modules/@s/a":{"version":"1.0.0-rc.1","resolved":"https://registry.npmjs.org/@s/a/-/a-1.0.0-rc.1.tgz","integrity":"sha256-AAAA="}}}`

func TestNPMLock(t *testing.T) {
	p, pj, err := NPMLock([]byte(goodNPM))
	want := []api.Package{{Name: "@s/a", Version: "1.0.0-rc.1"}, {Name: "is-number", Version: "6.0.0"}, {Name: "is-number", Version: "7.0.0"}}
	if err != nil || len(p) != 3 || p[0] != want[0] || p[1] != want[1] || p[2] != want[2] {
		t.Fatalf("%v %v", p, err)
	}
	if !strings.Contains(string(pj), `"dependencies":{"is-number":"7.0.0"}`) {
		t.Fatalf("package.json %s", pj)
	}
	bad := func(from, to string) string { return strings.Replace(goodNPM, from, to, 1) }
	for _, tc := range []struct{ lock, err string }{
		{bad(`"lockfileVersion":3`, `"lockfileVersion":1`), "lockfileVersion 1"},
		{bad(`"version":"7.0.0"`, `"version":"^7.0.0"`), "exact version"},
		{bad(`"integrity":"sha512-41`, `"integrity":"sha1-41`), "integrity"},
		{bad(`"resolved":"https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz"`, `"resolved":"git+ssh://git@github.com/x/y.git"`), "https registry tarball"},
		{bad(`"resolved":"https://registry.npmjs.org/is-number/-/is-number-7.0.0.tgz"`, `"resolved":"http://registry.npmjs.org/x.tgz"`), "https"},
		{bad(`"node_modules/is-number":{`, `"node_modules/is-number":{"link":true,`), "link"},
		{bad(`"node_modules/is-number":{`, `"packages/local":{`), "not below node_modules"},
		{bad(`"node_modules/is-number":{`, `"node_modules/../etc":{`), "not an npm package name"},
		{`{"lockfileVersion":3,"packages":{"":{}}}`, "no packages"},
		{`[`, "not JSON"},
	} {
		if _, _, err := NPMLock([]byte(tc.lock)); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("got %v, want %q", err, tc.err)
		}
	}
}

func TestPlanEnvironmentBuild(t *testing.T) {
	lock := "alpha==1.0 --hash=sha256:" + hashA
	whl := []api.ExecFile{{Path: "a.whl"}}
	for _, tc := range []struct {
		req      api.EnvironmentBuildRequest
		hostPort string
		err      string
	}{
		{api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: lock, Files: whl}, "", ""},
		{api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: lock, Index: "https://pypi.test:8443/simple/"}, "pypi.test:8443", ""},
		{api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: lock, Index: "https://PyPI.org/simple/"}, "pypi.org:443", ""},
		{api.EnvironmentBuildRequest{Name: "p", Language: "javascript", Lock: goodNPM}, "registry.npmjs.org:443", ""},
		{api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: lock, Index: "http://pypi.org/simple/"}, "", "https://"},
		{api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: lock, Index: "https://u:p@pypi.org/simple/"}, "", "credentials"},
		{api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: lock, Index: "https://pypi.org/", Files: whl}, "", "not both"},
		{api.EnvironmentBuildRequest{Name: "p", Language: "python", Lock: lock}, "", "not both or neither"},
		{api.EnvironmentBuildRequest{Name: "p", Language: "javascript", Lock: goodNPM, Files: whl}, "", "lockfile only"},
		{api.EnvironmentBuildRequest{Name: "../x", Language: "python", Lock: lock, Files: whl}, "", "environment name"},
		{api.EnvironmentBuildRequest{Name: "..", Language: "python", Lock: lock, Files: whl}, "", "environment name"},
		{api.EnvironmentBuildRequest{Name: "p", Language: "shell", Lock: lock}, "", "python or javascript"},
	} {
		p, err := PlanEnvironmentBuild(tc.req)
		if tc.err == "" && (err != nil || p.HostPort != tc.hostPort) {
			t.Errorf("%+v: %+v %v", tc.req, p, err)
		}
		if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%+v: got %v, want %q", tc.req, err, tc.err)
		}
	}
}
