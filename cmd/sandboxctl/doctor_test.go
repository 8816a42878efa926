package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/doctor"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// bareHost is a machine with nothing on it: every file is missing and no
// supervisor answers. It records where doctor looked.
type bareHost struct{ socket, helperConfig string }

var errMissing = errors.New("no such file or directory")

func (*bareHost) ReadFile(string) ([]byte, error)              { return nil, errMissing }
func (*bareHost) Stat(string) (doctor.FileInfo, error)         { return doctor.FileInfo{}, errMissing }
func (*bareHost) Lstat(string) (doctor.FileInfo, error)        { return doctor.FileInfo{}, errMissing }
func (*bareHost) ReadDir(string) ([]string, error)             { return nil, errMissing }
func (*bareHost) FileCaps(string) ([]byte, error)              { return nil, nil }
func (*bareHost) LookPath(string) (string, error)              { return "", errMissing }
func (*bareHost) GroupName(uint32) string                      { return "0" }
func (*bareHost) CheckRootOwned(string) error                  { return errMissing }
func (*bareHost) Cgroups(string, int, string) (string, string) { return "none", "" }
func (*bareHost) Run(context.Context, string, ...string) ([]byte, error) {
	return nil, errMissing
}
func (h *bareHost) LoadHelperConfig(p string) (*config.Config, error) {
	h.helperConfig = p
	return nil, errMissing
}
func (h *bareHost) Supervisor(_ context.Context, socket string) (*doctor.Supervisor, error) {
	h.socket = socket
	return nil, errMissing
}

func TestDoctorCommand(t *testing.T) {
	h := &bareHost{}
	old := doctorHost
	doctorHost = func() doctor.Host { return h }
	t.Cleanup(func() { doctorHost = old })

	env := map[string]string{"SANDBOXD_SOCKET": "/srv/s.sock", "SANDBOXD_HELPER_CONFIG": "/srv/nsinit.json"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"doctor", "--json"}, stdio{in: strings.NewReader(""), out: &out, err: &errb}, lookup)
	if code != exitNotReady {
		t.Fatalf("exit %d on a bare host, want %d; stderr %s", code, exitNotReady, errb.String())
	}
	var rep doctor.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil || rep.OK || len(rep.Checks) == 0 {
		t.Fatalf("--json output: %v %q", err, out.String())
	}
	if h.socket != "/srv/s.sock" || h.helperConfig != "/srv/nsinit.json" {
		t.Errorf("looked at socket %q, helper config %q; want the SANDBOXD_* values", h.socket, h.helperConfig)
	}

	out.Reset()
	code = run(context.Background(), []string{"doctor", "--socket", "/x.sock", "--helper-config", "/y.json"}, stdio{in: strings.NewReader(""), out: &out, err: &errb}, lookup)
	if code != exitNotReady || h.socket != "/x.sock" || h.helperConfig != "/y.json" {
		t.Errorf("flags: exit %d socket %q config %q", code, h.socket, h.helperConfig)
	}
	if !strings.Contains(out.String(), "FAIL  helper ") || !strings.Contains(out.String(), "fix: ") {
		t.Errorf("text output:\n%s", out.String())
	}

	errb.Reset()
	if code := run(context.Background(), []string{"doctor", "extra"}, stdio{in: strings.NewReader(""), out: &out, err: &errb}, lookup); code != exitUsage {
		t.Errorf("unexpected argument: exit %d", code)
	}
	if code := run(context.Background(), []string{"doctor", "--bogus"}, stdio{in: strings.NewReader(""), out: &out, err: &errb}, lookup); code != exitUsage {
		t.Errorf("unknown flag: exit %d", code)
	}
}

// TestDoctorRemoteCommand: --url runs the remote checks: /healthz is asked
// without the key, /v1/health with it; key flags without --url are a usage
// error, as for every command.
func TestDoctorRemoteCommand(t *testing.T) {
	auth := map[string]string{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth[r.URL.Path] = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte(`{"ok":true,"version":"9.9.9"}`))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true,"version":"9.9.9","checks":{"bwrap":"ok","userns":"ok","seccomp":"ok","helper":"ok","cgroups":"v2","disk":"ok"},"runtimes":["python"]}`))
	}))
	defer ts.Close()
	keyFile := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(keyFile, []byte("sekrit\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := ctl(t, "", "", nil, "doctor", "--json", "--url", ts.URL, "--api-key-file", keyFile)
	if r.code != exitOK {
		t.Fatalf("remote doctor: %+v", r)
	}
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !rep.OK {
		t.Fatalf("report: %v %s", err, r.stdout)
	}
	names := map[string]doctor.Status{}
	for _, c := range rep.Checks {
		names[c.Name] = c.Status
	}
	if names["remote.connect"] != doctor.OK || names["remote.healthz"] != doctor.OK || names["remote.auth"] != doctor.OK || names["local"] != doctor.Skip || names["helper.caps"] != "" {
		t.Errorf("checks: %v", names)
	}
	if auth["/healthz"] != "" || auth["/v1/health"] != "Bearer sekrit" {
		t.Errorf("Authorization sent: %q", auth)
	}
	if r := ctl(t, "/nonexistent.sock", "", nil, "doctor", "--api-key-file", keyFile); r.code != exitUsage || !strings.Contains(r.stderr, "need --url") {
		t.Errorf("key without url: %+v", r)
	}
}
