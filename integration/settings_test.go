package integration

import (
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// patchAs sends PATCH /v1/admin/settings from a process running as uid
// (real peer credentials) and returns the HTTP status line and body.
const patchAsClient = `
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = sys.argv[2].encode()
s.sendall(b"PATCH /v1/admin/settings HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
out = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    out += b
sys.stdout.write(out.decode())
`

func patchAs(t *testing.T, uid, gid int, sock, body string) string {
	t.Helper()
	cmd := exec.Command("/usr/bin/python3", "-c", patchAsClient, sock, body)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("client as uid %d: %v: %s", uid, err, out)
	}
	return string(out)
}

// TestAdminSettings: live settings under the operator's caps, with real
// privilege separation (the supervisor runs as the service user, the
// non-admin caller as another uid).
func TestAdminSettings(t *testing.T) {
	in := setup(t)
	hostile := hostileUser(t)
	if err := os.Chmod(in.path("run"), 0o750); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chmod(in.path("run"), 0o700) })
	_ = os.Remove(in.path("state/sessions", "admin-settings.state")) // an earlier run's
	t.Cleanup(func() { _ = os.Remove(in.path("state/sessions", "admin-settings.state")) })
	opts := supervisorOpts{extra: []string{"--allow-uid", strconv.Itoa(hostile), "--exec-timeout", "20000"}}
	s := in.startSupervisor(t, opts)

	// A caller allowed to use the API but not an admin: 403, nothing changes.
	if out := patchAs(t, hostile, in.gid, s.socket, `{"exec_timeout_ms": 1000}`); !strings.HasPrefix(out, "HTTP/1.1 403") || !strings.Contains(out, "not an admin") {
		t.Fatalf("non-admin PATCH: %s", out)
	}
	// Above the operator's cap: 400 naming the cap.
	status, body := s.do("PATCH", api.AdminSettingsPath, `{"exec_timeout_ms": 20001}`)
	if status != 400 || !strings.Contains(string(body), "cap 20000") {
		t.Fatalf("above cap: %d %s", status, body)
	}
	status, body = s.do("PATCH", api.AdminSettingsPath, `{"exec_timeout_ms": 1500}`)
	if status != 200 {
		t.Fatalf("patch: %d %s", status, body)
	}

	// The next exec, without a restart, times out at the new default.
	sleeper := py("import time\ntime.sleep(15)")
	checkTimesOutAt := func(s *supervisor) {
		t.Helper()
		begin := time.Now()
		r := s.exec(sleeper)
		if took := time.Since(begin); !r.TimedOut || took > 8*time.Second {
			t.Fatalf("exec: timed_out %v after %v, want a timeout at 1.5 s: %+v", r.TimedOut, took, r)
		}
	}
	checkTimesOutAt(s)

	// SIGKILL, restart: the setting survives.
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s2 := in.startSupervisor(t, opts)
	status, body = s2.do("GET", api.AdminSettingsPath, nil)
	var got api.Settings
	if err := json.Unmarshal(body, &got); status != 200 || err != nil {
		t.Fatalf("get: %d %s %v", status, body, err)
	}
	var seen bool
	for _, st := range got.Settings {
		if st.Key == "exec_timeout_ms" {
			seen = st.Value == float64(1500) && st.Cap == float64(20000) && st.Source == "admin"
		}
	}
	if !seen {
		t.Fatalf("after restart: %s", body)
	}
	checkTimesOutAt(s2)
	// sandboxctl shows the same, and sets through the same route.
	out, err := exec.Command(in.path("bin/sandboxctl"), "admin", "settings", "set", "max_sessions=3", "--socket", s2.socket).CombinedOutput()
	if err != nil || !regexpSetting("exec_timeout_ms", "1500", "20000", "admin").Match(out) || !regexpSetting("max_sessions", "3", "16", "admin").Match(out) {
		t.Fatalf("sandboxctl admin settings set: %v\n%s", err, out)
	}

	// Audited in the first supervisor's log: who, old -> new.
	var audited bool
	for _, rec := range s.auditRecords() {
		if rec["step"] != "settings.change" || rec["ok"] != true {
			continue
		}
		b, _ := json.Marshal(rec["facts"])
		if rec["caller_uid"] == float64(0) && strings.Contains(string(b), `"exec_timeout_ms":{"new":1500,"old":20000,"source":"admin"}`) {
			audited = true
		}
	}
	if !audited {
		t.Fatal("no settings.change audit record with old -> new")
	}
}

// regexpSetting matches one row of `sandboxctl admin settings` output.
func regexpSetting(key, value, limit, source string) *regexp.Regexp {
	return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + ` +` + regexp.QuoteMeta(value) + ` +` + regexp.QuoteMeta(limit) + ` +` + regexp.QuoteMeta(source) + `$`)
}
