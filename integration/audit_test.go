package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/audittest"
)

// auditLogPath is a fresh audit log path in the installation's state dir,
// passed to the supervisor with --audit-log (the last flag wins).
func auditLogPath(in *installation) string {
	return in.path("state/logs", "audit-own-"+randID()+".log")
}

// auditRead verifies the log at path (it must be intact) and returns its
// records.
func auditRead(t *testing.T, path string) []audit.Record {
	t.Helper()
	var recs []audit.Record
	rep, err := audit.Verify(os.DirFS(filepath.Dir(path)), filepath.Base(path), audit.VerifyOptions{
		Visit: func(_ string, _ int, r audit.Record) { recs = append(recs, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Intact {
		t.Fatalf("the audit log %s does not verify: %v", path, rep.Break)
	}
	// Every record the real supervisor and helper wrote is as the typed
	// schema (audit/facts, SCHEMA.md) says.
	if rep.FactErrorCount != 0 {
		t.Fatalf("the audit log %s has %d record(s) not as the schema says: %+v", path, rep.FactErrorCount, rep.FactErrors)
	}
	return recs
}

func auditExec(recs []audit.Record, id string) []audit.Record {
	var out []audit.Record
	for _, r := range recs {
		if r.ExecID == id {
			out = append(out, r)
		}
	}
	return out
}

func auditSteps(recs []audit.Record) string {
	var s []string
	for _, r := range recs {
		st := r.Step
		if !r.OK {
			st += "!"
		}
		s = append(s, st)
	}
	return strings.Join(s, " ")
}

func auditStep(recs []audit.Record, step string) audit.Record {
	for _, r := range recs {
		if r.Step == step {
			return r
		}
	}
	return audit.Record{}
}

// sandboxctlAudit runs the real sandboxctl binary.
func sandboxctlAudit(t *testing.T, in *installation, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(in.path("bin/sandboxctl"), append([]string{"audit"}, args...)...)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}

// postExec posts an exec and returns the status, the audited exec id and
// the body, whatever the answer.
func postExec(t *testing.T, s *supervisor, body any) (int, string, []byte) {
	t.Helper()
	var rd []byte
	switch b := body.(type) {
	case string:
		rd = []byte(b)
	default:
		rd, _ = json.Marshal(b)
	}
	req, _ := http.NewRequest("POST", "http://sandboxd/v1/exec", bytes.NewReader(rd))
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Sandboxd-Exec-Id"), out.Bytes()
}

// jsonEqual compares two values by their JSON form.
func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	var va, vb any
	_ = json.Unmarshal(ja, &va)
	_ = json.Unmarshal(jb, &vb)
	return reflect.DeepEqual(va, vb)
}

// TestAuditRecordSets: the complete record set of a success, a timeout, a
// refused request and a request refused at accept; the policy attestation
// of each result equals the audit records; env values are not recorded.
func TestAuditRecordSets(t *testing.T) {
	in := setup(t)
	path := auditLogPath(in)
	// The cold trail; a warm exec's is TestWarmAuditTrail's.
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", path, "--warm-pool", "0"}})

	ok := s.exec(map[string]any{"language": "python", "code": "print(1)", "env": map[string]string{"API_TOKEN": "t0k3n-secret"}})
	timeout := s.exec(map[string]any{"language": "python", "code": "import time\nprint('started', flush=True)\ntime.sleep(30)", "timeout_ms": 1000})
	status, refusedID, _ := postExec(t, s, map[string]any{"language": "ruby", "code": "puts 1"})
	if status != 400 || refusedID == "" {
		t.Fatalf("refused request: %d %q", status, refusedID)
	}
	status, malformedID, _ := postExec(t, s, `{"language": "python", "code": `)
	if status != 400 || malformedID == "" {
		t.Fatalf("malformed request: %d %q", status, malformedID)
	}
	s.stop()
	recs := auditRead(t, path)

	full := "accept decide prepare enter network seccomp drop exec reap"
	for _, c := range []struct {
		name, id, want string
	}{
		{"success", ok.ID, full},
		{"timeout", timeout.ID, full},
		{"refused at decide (no helper step)", refusedID, "accept decide!"},
		{"refused at accept", malformedID, "accept!"},
	} {
		got := auditExec(recs, c.id)
		if auditSteps(got) != c.want {
			t.Errorf("%s: steps %q, want %q", c.name, auditSteps(got), c.want)
		}
		for _, r := range got {
			if r.CallerUID != 0 || r.CallerPID <= 0 {
				t.Errorf("%s: %s record has caller uid %d pid %d, want this test (uid 0)", c.name, r.Step, r.CallerUID, r.CallerPID)
			}
			wantSource := audit.SourceSupervisor
			if r.Step == audit.StepEnter || r.Step == audit.StepNetwork || r.Step == audit.StepSeccomp || r.Step == audit.StepDrop || r.Step == audit.StepExec {
				wantSource = audit.SourceNsinit
			}
			if r.Source != wantSource {
				t.Errorf("%s: %s record from %q", c.name, r.Step, r.Source)
			}
		}
	}
	fmt.Printf("audit: a successful exec leaves %d records\n", len(auditExec(recs, ok.ID)))

	// The facts of the success, step by step.
	okRecs := auditExec(recs, ok.ID)
	decide := auditStep(okRecs, audit.StepDecide)
	if !jsonEqual(decide.FactMap()["env_names"], []string{"API_TOKEN"}) || decide.FactMap()["env_values_recorded"] != false || decide.FactMap()["env"] != nil {
		t.Errorf("decide env facts %v", decide.Facts)
	}
	raw, _ := os.ReadFile(path)
	if bytes.Contains(raw, []byte("t0k3n-secret")) {
		t.Error("an env value reached the audit log without --audit-env-values")
	}
	enter := auditStep(okRecs, audit.StepEnter).FactMap()
	if enter["uid_map"] != fmt.Sprintf("1000 %d 1", in.uid) || enter["setgroups"] != "deny" || enter["userns_inode"] == nil {
		t.Errorf("enter facts %v", enter)
	}
	drop := auditStep(okRecs, audit.StepDrop).FactMap()
	for _, k := range []string{"cap_eff", "cap_prm", "cap_inh", "cap_amb"} {
		if v, _ := drop[k].(string); v == "" || strings.Trim(v, "0") != "" {
			t.Errorf("drop %s = %v", k, drop[k])
		}
	}
	if drop["no_new_privs"] != float64(1) {
		t.Errorf("drop facts %v", drop)
	}
	execF := auditStep(okRecs, audit.StepExec).FactMap()
	if argv, _ := execF["argv"].([]any); len(argv) < 10 || argv[0] == "" {
		t.Errorf("exec argv %v", execF["argv"])
	}
	reap := auditStep(okRecs, audit.StepReap).FactMap()
	// Typed facts (audit/facts.Reap) leave a false flag out: absent is false.
	if reap["exit_code"] != float64(0) || reap["timed_out"] == true {
		t.Errorf("reap facts %v", reap)
	}
	treap := auditStep(auditExec(recs, timeout.ID), audit.StepReap).FactMap()
	if treap["timed_out"] != true || treap["signal"] != "SIGKILL" || treap["exit_code"] != nil {
		t.Errorf("timeout reap facts %v", treap)
	}
	if d := auditStep(auditExec(recs, refusedID), audit.StepDecide); d.FactMap()["code"] != "invalid_argument" || !strings.Contains(d.Error, "ruby") {
		t.Errorf("refusal %+v", d)
	}

	// Policy attestation = the audit records.
	for _, r := range []execResult{ok, timeout} {
		rs := auditExec(recs, r.ID)
		sec, ex, prep := auditStep(rs, audit.StepSeccomp).FactMap(), auditStep(rs, audit.StepExec).FactMap(), auditStep(rs, audit.StepPrepare).FactMap()
		if r.Policy.ProfileSHA256 == "" || r.Policy.ProfileSHA256 != sec["profile_sha256"] || r.Policy.ProfileSHA256 != ex["profile_sha256"] {
			t.Errorf("%s: profile_sha256 %q, seccomp record %v, exec record %v", r.ID, r.Policy.ProfileSHA256, sec["profile_sha256"], ex["profile_sha256"])
		}
		if r.Policy.MountsSHA256 == "" || r.Policy.MountsSHA256 != ex["mounts_sha256"] {
			t.Errorf("%s: mounts_sha256 %q, exec record %v", r.ID, r.Policy.MountsSHA256, ex["mounts_sha256"])
		}
		if r.Policy.HelperVersion == "" || r.Policy.HelperVersion != ex["helper_version"] {
			t.Errorf("%s: helper_version %q, exec record %v", r.ID, r.Policy.HelperVersion, ex["helper_version"])
		}
		if !jsonEqual(r.Policy.Limits, prep["limits"]) {
			t.Errorf("%s: attested limits %v, prepare record (as applied) %v", r.ID, r.Policy.Limits, prep["limits"])
		}
	}

	// sandboxctl tells each story.
	out, code := sandboxctlAudit(t, in, "show", "--log", path, ok.ID)
	if code != 0 || !strings.Contains(out, "outcome: ran: exit code 0") || !strings.Contains(out, "9. reap") || !strings.Contains(out, "chain intact") {
		t.Errorf("show success: exit %d\n%s", code, out)
	}
	out, code = sandboxctlAudit(t, in, "show", "--log", path, timeout.ID[:10])
	if code != 0 || !strings.Contains(out, "outcome: ran: timed out and was killed with SIGKILL") {
		t.Errorf("show timeout: exit %d\n%s", code, out)
	}
	out, code = sandboxctlAudit(t, in, "show", "--log", path, refusedID)
	if code != 0 || !strings.Contains(out, "refused by policy (decide)") || strings.Contains(out, "3. ") {
		t.Errorf("show refused: exit %d\n%s", code, out)
	}
	out, code = sandboxctlAudit(t, in, "verify", path)
	if code != 0 || !strings.Contains(out, "audit log intact") || !strings.Contains(out, "4 accepted: 2 ran, 0 launch failures, 2 refused") {
		t.Errorf("verify: exit %d\n%s", code, out)
	}
}

// TestAuditEnvValues: with --audit-env-values the decide record carries the
// request's env values.
func TestAuditEnvValues(t *testing.T) {
	in := setup(t)
	path := auditLogPath(in)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", path, "--audit-env-values"}})
	r := s.exec(map[string]any{"language": "python", "code": "print(1)", "env": map[string]string{"MODE": "fast"}})
	s.stop()
	d := auditStep(auditExec(auditRead(t, path), r.ID), audit.StepDecide)
	if d.FactMap()["env_values_recorded"] != true || !jsonEqual(d.FactMap()["env"], map[string]string{"MODE": "fast"}) {
		t.Fatalf("decide facts %v", d.Facts)
	}
}

// TestAuditHelperFailure: the record set of a launch the helper refused to
// finish (bwrap missing): every helper step up to the failing one, then a
// failed reap.
func TestAuditHelperFailure(t *testing.T) {
	in := setup(t)
	cfgPath := in.path("etc", "nsinit-audit-nobwrap.json")
	if err := in.buildHelper("nsinit-audit-nobwrap", cfgPath, true); err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	b, _ := json.Marshal(in.helperConfig())
	_ = json.Unmarshal(b, &cfg)
	cfg["bwrap"] = "/nonexistent/bwrap"
	if err := writeJSON(cfgPath, cfg); err != nil {
		t.Fatal(err)
	}
	path := auditLogPath(in)
	s := in.startSupervisor(t, supervisorOpts{helper: "nsinit-audit-nobwrap", extra: []string{"--audit-log", path}})
	status, id, body := postExec(t, s, py("print('ran')"))
	if status != 503 {
		t.Fatalf("status %d: %s", status, body)
	}
	s.stop()
	recs := auditExec(auditRead(t, path), id)
	if got := auditSteps(recs); got != "accept decide prepare enter network seccomp drop exec! reap!" {
		t.Fatalf("steps %q", got)
	}
	if e := auditStep(recs, audit.StepExec); !strings.Contains(e.Error, "bwrap") || e.Source != audit.SourceNsinit {
		t.Fatalf("failed exec record %+v", e)
	}
	out, code := sandboxctlAudit(t, in, "show", "--log", path, id)
	if code != 0 || !strings.Contains(out, "the launch failed (the payload never ran)") || !strings.Contains(out, "8. exec") || !strings.Contains(out, "FAILED") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
}

// TestAuditSupervisorKilledMidExec: SIGKILL the supervisor while an exec
// runs, restart it on the same log: the chain continues intact and the
// trail says the exec was interrupted.
func TestAuditSupervisorKilledMidExec(t *testing.T) {
	in := setup(t)
	path := auditLogPath(in)
	// The cold trail (the exec is found by its exec step); a warm one is
	// TestWarmPoolSIGKILLLeavesNothing's.
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", path, "--warm-pool", "0"}})
	done := make(chan struct{})
	go func() {
		defer close(done)
		body, _ := json.Marshal(map[string]any{"language": "python", "code": "import time\ntime.sleep(60)", "timeout_ms": 60000})
		req, _ := http.NewRequest("POST", "http://sandboxd/v1/exec", bytes.NewReader(body))
		if resp, err := s.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	// Wait until the helper reported its exec step: the payload is starting.
	var id string
	deadline := time.Now().Add(20 * time.Second)
	for id == "" && time.Now().Before(deadline) {
		raw, _ := os.ReadFile(path)
		for _, line := range bytes.Split(raw, []byte("\n")) {
			var r audit.Record
			if json.Unmarshal(line, &r) == nil && r.Step == audit.StepExec && r.OK {
				id = r.ExecID
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if id == "" {
		t.Fatal("the exec never reached its exec step")
	}
	time.Sleep(200 * time.Millisecond)
	// The exec's processes: everything below this supervisor (other test
	// runs may use the same service user at the same time).
	tree := descendants(s.cmd.Process.Pid)
	if len(tree) < 2 {
		t.Fatalf("the exec's processes not found below the supervisor: %v", tree)
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	<-done
	deadline = time.Now().Add(10 * time.Second)
	for len(alive(tree)) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if left := alive(tree); len(left) > 0 {
		t.Fatalf("the exec outlived its supervisor: %v", left)
	}
	// Before the restart the log verifies (nothing was torn) and shows the
	// exec without an end.
	out, code := sandboxctlAudit(t, in, "verify", path)
	if code != 0 || !strings.Contains(out, "1 without an end") {
		t.Fatalf("verify before the restart: exit %d\n%s", code, out)
	}

	s2 := in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", path, "--warm-pool", "0"}})
	r := s2.exec(py("print('after')"))
	s2.stop()
	recs := auditRead(t, path)
	if got := auditSteps(auditExec(recs, id)); got != "accept decide prepare enter network seccomp drop exec interrupted!" {
		t.Fatalf("steps of the killed exec %q", got)
	}
	ir := auditStep(auditExec(recs, id), audit.StepInterrupted)
	if ir.Source != audit.SourceSupervisor || ir.CallerUID != 0 || ir.FactMap()["last_step"] != audit.StepExec || !strings.Contains(ir.Error, "killed or crashed") {
		t.Fatalf("interrupted record %+v", ir)
	}
	var starts []audit.Record
	for _, rec := range recs {
		if rec.Step == audit.StepStart {
			starts = append(starts, rec)
		}
	}
	if len(starts) != 2 || starts[1].FactMap()["previous_shutdown"] != "unclean" || starts[1].Seq >= ir.Seq {
		t.Fatalf("start records %+v", starts)
	}
	if got := auditSteps(auditExec(recs, r.ID)); got != "accept decide prepare enter network seccomp drop exec reap" {
		t.Fatalf("the exec after the restart: %q", got)
	}
	out, code = sandboxctlAudit(t, in, "show", "--log", path, id)
	if code != 0 || !strings.Contains(out, "outcome: interrupted: the supervisor stopped (killed or crashed)") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}
	out, code = sandboxctlAudit(t, in, "verify", path)
	if code != 0 || !strings.Contains(out, "1 interrupted, 0 without an end") || !strings.Contains(out, "2 starts") {
		t.Fatalf("verify after the restart: exit %d\n%s", code, out)
	}
}

// TestAuditMutations takes a real log (rotated files included) written by
// real execs -- successes, a timeout, refusals -- and applies every kind of
// tampering at every line and every byte: verify must catch
// each one. It prints the counts.
func TestAuditMutations(t *testing.T) {
	in := setup(t)
	dir := in.path("state/logs", "audit-mut-"+randID())
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_ = os.Chown(dir, in.uid, in.gid)
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.log")
	// Without the warm pool: its builds' records would grow the log, and
	// the mutation count grows with the square of it.
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", path, "--audit-rotate-bytes", "16384", "--warm-pool", "0"}})
	s.exec(py("print(1)"))
	s.exec(map[string]any{"language": "javascript", "code": "console.log(6*7)"})
	s.exec(map[string]any{"language": "python", "code": "import sys; sys.exit(3)", "files": []map[string]string{{"path": "a.txt", "content_base64": "YQ=="}}})
	s.exec(map[string]any{"language": "python", "code": "import time; time.sleep(30)", "timeout_ms": 800})
	postExec(t, s, map[string]any{"language": "ruby", "code": "puts 1"})
	postExec(t, s, `{"language": "python", "code": 1}`)
	s.exec(py("print(2)"))
	s.stop()
	// And a second supervisor run on the same log.
	s = in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", path, "--audit-rotate-bytes", "16384", "--warm-pool", "0"}})
	s.exec(py("print(3)"))
	s.stop()

	l, err := audittest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	files := l.LogFiles("audit.log")
	if len(files) < 3 {
		t.Fatalf("only %d files: the log should have rotated", len(files))
	}
	rep, err := audit.Verify(l.FS(), "audit.log", audit.VerifyOptions{})
	if err != nil || !rep.Intact {
		t.Fatalf("the pristine log does not verify: %v %+v", err, rep.Break)
	}
	size := 0
	for _, f := range files {
		size += len(l[f])
	}
	fmt.Printf("\naudit mutation test: a real log of %d records in %d files (%d bytes), %d execs\n", rep.Records, len(files), size, rep.Execs)

	applied, caught := map[string]int{}, map[string]int{}
	sample := map[string]audittest.Mutation{}
	for _, m := range audittest.Mutations(l, "audit.log", audittest.Options{Seed: 42, MaxEditsPerFile: 1 << 20}) {
		applied[m.Kind]++
		rep, err := audit.Verify(m.Log.FS(), "audit.log", audit.VerifyOptions{ChainOnly: true})
		if err != nil {
			t.Fatalf("%s %s: %v", m.Kind, m.Where, err)
		}
		if rep.Break == nil {
			t.Errorf("NOT DETECTED: %s at %s", m.Kind, m.Where)
			continue
		}
		caught[m.Kind]++
		if _, ok := sample[m.Kind]; !ok || applied[m.Kind] == 7 {
			sample[m.Kind] = m
		}
	}
	total, totalCaught := 0, 0
	for _, k := range audittest.Kinds {
		fmt.Printf("  %-22s applied %6d  detected %6d\n", k, applied[k], caught[k])
		total += applied[k]
		totalCaught += caught[k]
		if applied[k] == 0 || caught[k] != applied[k] {
			t.Errorf("%s: %d of %d detected", k, caught[k], applied[k])
		}
	}
	fmt.Printf("  %-22s applied %6d  detected %6d (%.1f %%)\n", "all", total, totalCaught, 100*float64(totalCaught)/float64(total))

	// The CLI names the first broken point of one mutation of each kind.
	for _, k := range audittest.Kinds {
		m := sample[k]
		d := t.TempDir()
		for name, b := range m.Log {
			if err := os.WriteFile(filepath.Join(d, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		out, code := sandboxctlAudit(t, in, "verify", filepath.Join(d, "audit.log"))
		if code != 1 || !strings.Contains(out, "audit log BROKEN") || !strings.Contains(out, "first broken point") {
			t.Errorf("sandboxctl on %s (%s): exit %d\n%s", k, m.Where, code, out)
		}
		t.Logf("%s (%s):\n%s", k, m.Where, out)
	}
}

// TestAuditSyslogForwarding: the real supervisor forwards every record to a
// listening Unix datagram socket as RFC 5424, the record line as message.
func TestAuditSyslogForwarding(t *testing.T) {
	in := setup(t)
	sock := in.path("run", "syslog-"+randID()+".sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	defer os.Remove(sock)
	if err := os.Chmod(sock, 0o666); err != nil { // the service user sends to it
		t.Fatal(err)
	}
	got := make(chan []byte, 1024)
	go func() {
		buf := make([]byte, 1<<20)
		for {
			n, err := ln.Read(buf)
			if err != nil {
				close(got)
				return
			}
			got <- append([]byte(nil), buf[:n]...)
		}
	}()
	path := auditLogPath(in)
	// The cold trail of 9 records: with a warm pool, an exec that found a
	// sandbox ready (a race with the pool's first build) has 4 of its own.
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", path, "--audit-syslog", sock, "--warm-pool", "0"}})
	r := s.exec(py("print(1)"))
	s.stop()
	raw, _ := os.ReadFile(path)
	lines := bytes.Split(bytes.TrimSuffix(raw, []byte("\n")), []byte("\n"))
	var msgs [][]byte
	timeout := time.After(10 * time.Second)
	for len(msgs) < len(lines) {
		select {
		case m := <-got:
			msgs = append(msgs, m)
		case <-timeout:
			t.Fatalf("%d of %d records arrived", len(msgs), len(lines))
		}
	}
	seen := 0
	for i, m := range msgs {
		bom := bytes.Index(m, []byte("\xEF\xBB\xBF"))
		if bom < 0 || !bytes.HasPrefix(m, []byte("<8")) || !bytes.Contains(m[:bom], []byte(" sandboxd ")) {
			t.Fatalf("message %d is not RFC 5424 as expected: %q", i, m)
		}
		if !bytes.Equal(m[bom+3:], lines[i]) {
			t.Fatalf("message %d carries another record than line %d:\n%s\n%s", i, i+1, m[bom+3:], lines[i])
		}
		if bytes.Contains(m[:bom], []byte(`exec_id="`+r.ID+`"`)) {
			seen++
		}
	}
	if seen != 9 {
		t.Fatalf("%d messages of exec %s, want its 9 records", seen, r.ID)
	}
}

// procStat returns the parent pid and start time of pid.
func procStat(pid int) (ppid int, start string, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, "", false
	}
	// The command may hold spaces and parentheses; fields follow the last ')'.
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0, "", false
	}
	fmt.Sscan(f[1], &ppid)
	return ppid, f[19], true
}

// descendants returns every process below root (pid -> start time).
func descendants(root int) map[int]string {
	parent := map[int]int{}
	starts := map[int]string{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		if pp, st, ok := procStat(pid); ok {
			parent[pid], starts[pid] = pp, st
		}
	}
	out := map[int]string{}
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p == root {
				out[pid] = starts[pid]
				break
			}
		}
	}
	return out
}

// alive returns the processes of tree that still exist (same pid, same start).
func alive(tree map[int]string) []int {
	var out []int
	for pid, st := range tree {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil && bytes.Contains(b, []byte(") Z ")) {
			continue // a zombie: dead, not yet reaped
		}
		if _, s, ok := procStat(pid); ok && s == st {
			out = append(out, pid)
		}
	}
	return out
}
