package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
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
