package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
)

const (
	execOK      = "3f7c0b9e5d2a41c8a6e0f1b2c3d4e5f6"
	execRefused = "3f00aa11bb22cc33dd44ee55ff667788"
)

// writeLog writes a log with one successful launch (facts as the real
// supervisor and helper write them) and one refused request.
func writeLog(t *testing.T, rotate int64) string {
	t.Helper()
	return writeLogWith(t, rotate, nil)
}

// writeLogWith writes writeLog's log with extra facts on the reap record.
func writeLogWith(t *testing.T, rotate int64, reapExtra map[string]any) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := audit.Open(path, audit.Options{RotateBytes: rotate, Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("ab", 32)
	c := func(id, step, source string, ok bool, errMsg string, facts map[string]any) {
		t.Helper()
		if err := w.Write(audit.Record{ExecID: id, Step: step, Source: source, CallerUID: 1001, CallerGID: 1002, CallerPID: 4242,
			OK: ok, Error: errMsg, Facts: facts}); err != nil {
			t.Fatal(err)
		}
	}
	c(execOK, "accept", "supervisor", true, "", map[string]any{"method": "POST", "path": "/v1/exec", "body_bytes": 45, "content_length": 45})
	c(execOK, "decide", "supervisor", true, "", map[string]any{"session": false, "runtime": "python", "code_bytes": 8, "code_sha256": sha,
		"file_count": 0, "file_bytes": 0, "env_names": []string{"API_TOKEN"}, "env_values_recorded": false, "artifacts": nil, "network": "none",
		"limits": map[string]any{"timeout_ms": 30000, "memory_bytes": 2147483648}, "stdin_bytes": 0})
	c(execOK, "prepare", "supervisor", true, "", map[string]any{"workspace": "/var/lib/sandboxd/workspaces/x", "workspace_kind": "one-shot",
		"files": 0, "file_bytes": 0, "stdio": "pipes", "cgroup_mode": "none", "limits": map[string]any{"timeout_ms": 30000, "memory_bytes": 0}})
	c(execOK, "enter", "nsinit", true, "", map[string]any{"exec_id": execOK, "caller_uid": 1001, "runtime": "python", "probe": false,
		"helper_version": "0.1.0", "config": "/etc/sandboxd/nsinit.json", "config_sha256": sha, "euid": 998, "egid": 998,
		"uid_map": "1000 998 1", "gid_map": "1000 998 1", "setgroups": "deny", "holder_pid": 777, "prelude_us": 210,
		"userns_inode": 4026532001, "own_userns_inode": 4026531837, "workspace": "x", "t_us": 900})
	c(execOK, "network", "nsinit", true, "", map[string]any{"mode": "none", "netns_inode": 4026532003, "links": []string{"lo"}, "addrs": []string{"127.0.0.1/8"}, "t_us": 1000})
	c(execOK, "seccomp", "nsinit", true, "", map[string]any{"profile": "/etc/sandboxd/profiles/payload.json", "profile_sha256": sha,
		"bpf_source": "precompiled", "bpf_instructions": 640, "bpf_sha256": sha, "applied_by": "bwrap --seccomp", "t_us": 1100})
	c(execOK, "drop", "nsinit", true, "", map[string]any{"rlimits": map[string]any{"RLIMIT_CORE": 0}, "threads_checked": 5,
		"cap_inh": "0000000000000000", "cap_prm": "0000000000000000", "cap_eff": "0000000000000000", "cap_amb": "0000000000000000",
		"cap_bnd": "000001ffffffffff", "no_new_privs": 1, "t_us": 1200})
	c(execOK, "exec", "nsinit", true, "", map[string]any{"argv": []string{"/usr/bin/bwrap", "--unshare-pid", "--"}, "bwrap_env": []string{"PATH=/usr/bin"},
		"payload_env_names": []string{"API_TOKEN", "PATH"}, "mounts_sha256": "cd" + sha[2:], "profile_sha256": sha, "helper_version": "0.1.0", "code_sha256": sha, "t_us": 1300})
	reap := map[string]any{"exit_code": 0, "signal": nil, "timed_out": false, "duration_ms": 41,
		"usage": map[string]any{"cpu_ms": 30, "max_rss_kb": 9000}, "bwrap_child_pid": 3, "stdout_bytes": 2, "stderr_bytes": 0,
		"stdout_truncated": false, "stderr_truncated": false, "pid_namespace_gone": true}
	for k, v := range reapExtra {
		reap[k] = v
	}
	c(execOK, "reap", "supervisor", true, "", reap)
	c(execRefused, "accept", "supervisor", true, "", map[string]any{"method": "POST", "path": "/v1/exec", "body_bytes": 40})
	c(execRefused, "decide", "supervisor", false, `language "ruby" is not supported`, map[string]any{"session": false, "code": "invalid_argument"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func actl(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, stdio{in: strings.NewReader(""), out: &out, err: &errb},
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return out.String(), errb.String(), code
}

func TestAuditVerifyIntact(t *testing.T) {
	path := writeLog(t, 0)
	out, errOut, code := actl(t, nil, "audit", "verify", path)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	for _, want := range []string{"audit log intact: " + path, "2 accepted: 1 ran, 0 launch failures, 1 refused", "proven by the head file", "the log ends with a clean stop"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The default log comes from the environment.
	if _, _, code := actl(t, map[string]string{"SANDBOXD_AUDIT_LOG": path}, "audit", "verify"); code != 0 {
		t.Fatalf("verify of $SANDBOXD_AUDIT_LOG: exit %d", code)
	}
	state := t.TempDir()
	if err := os.Mkdir(filepath.Join(state, "audit"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(path, filepath.Join(state, "audit", "audit.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(path+".head", filepath.Join(state, "audit", "audit.log.head")); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	if _, _, code := actl(t, map[string]string{"SANDBOXD_STATE_DIR": state}, "audit", "verify"); code != 0 {
		t.Fatalf("verify of $SANDBOXD_STATE_DIR/audit/audit.log: exit %d", code)
	}
	out, _, code = actl(t, nil, "audit", "verify", "--json", path)
	var v struct {
		Intact bool `json:"intact"`
		Logs   []struct {
			Path   string       `json:"path"`
			Report audit.Report `json:"report"`
		} `json:"logs"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || !v.Intact || len(v.Logs) != 1 || v.Logs[0].Report.Execs != 2 {
		t.Fatalf("--json: exit %d, %v: %s", code, err, out)
	}
}

func TestAuditVerifyBroken(t *testing.T) {
	path := writeLog(t, 0)
	raw, _ := os.ReadFile(path)
	lines := bytes.SplitAfter(raw, []byte("\n"))
	// Delete the decide record of the successful exec (line 4).
	tampered := bytes.Join(append(append([][]byte{}, lines[:3]...), lines[4:]...), nil)
	if err := os.WriteFile(path, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code := actl(t, nil, "audit", "verify", path)
	if code != exitAuditBroken || !strings.Contains(out, "audit log BROKEN") || !strings.Contains(out, "audit.log line 4") || !strings.Contains(out, "deleted") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	out, _, code = actl(t, nil, "audit", "verify", "--json", path)
	if code != exitAuditBroken || !strings.Contains(out, `"kind": "deleted"`) || !strings.Contains(out, `"intact": false`) {
		t.Fatalf("--json exit %d:\n%s", code, out)
	}
	// show still tells the story, and says the log is broken.
	out, _, code = actl(t, nil, "audit", "show", "--log", path, execOK[:6])
	if code != exitAuditBroken || !strings.Contains(out, "WARNING: the chain is BROKEN") || !strings.Contains(out, "UNVERIFIED") {
		t.Fatalf("show on a broken log: exit %d\n%s", code, out)
	}
	if _, errOut, code := actl(t, nil, "audit", "verify", filepath.Join(t.TempDir(), "nope.log")); code != exitAuditBroken || !strings.Contains(errOut+out, "") {
		t.Fatalf("missing file: exit %d %s", code, errOut)
	}
}

func TestAuditShow(t *testing.T) {
	path := writeLog(t, 0)
	out, errOut, code := actl(t, nil, "audit", "show", "--log", path, execOK)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	for _, want := range []string{
		"exec " + execOK,
		"chain intact",
		"asked by uid 1001, gid 1002, pid 4242 (SO_PEERCRED)",
		"outcome: ran: exit code 0 after 41 ms (cpu 30 ms, max rss 9000 KiB)",
		"held to: profile sha256 " + strings.Repeat("ab", 32) + ", mounts sha256 cd",
		`limits {"memory_bytes":0,"timeout_ms":30000}`, // as the launcher applied them
		"1. accept", "9. reap",
		"The request POST /v1/exec (45 bytes) was read and decoded strictly",
		"Env names: [API_TOKEN]; values not recorded",
		`wrote uid_map "1000 998 1"`,
		"the links are [lo]",
		"CapEff 0000000000000000",
		"no_new_privs reads back 1",
		"execve bubblewrap with the argv the helper built: /usr/bin/bwrap --unshare-pid --",
		"pid namespace gone: yes",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "other facts") || strings.Contains(out, "NOT AS THE SCHEMA SAYS") {
		t.Errorf("a known fact was left unrendered, or a fact is not as the schema says:\n%s", out)
	}

	out, _, code = actl(t, nil, "audit", "show", "--log", path, execRefused)
	if code != 0 || !strings.Contains(out, `outcome: refused by policy (decide): language "ruby" is not supported`) || strings.Contains(out, "3. ") {
		t.Fatalf("refused: exit %d\n%s", code, out)
	}

	out, _, code = actl(t, nil, "audit", "show", "--json", "--log", path, execOK)
	var v struct {
		ExecID    string           `json:"exec_id"`
		LogIntact bool             `json:"log_intact"`
		Records   []map[string]any `json:"records"`
		Summary   map[string]any   `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || v.ExecID != execOK || !v.LogIntact || len(v.Records) != 9 || v.Records[0]["verified"] != true {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}

	if _, errOut, code := actl(t, nil, "audit", "show", "--log", path, "3f"); code != exitUsage || !strings.Contains(errOut, "prefix of 2 exec ids") {
		t.Fatalf("ambiguous prefix: exit %d %s", code, errOut)
	}
	if _, errOut, code := actl(t, nil, "audit", "show", "--log", path, "ffff"); code != exitAuditBroken || !strings.Contains(errOut, "no record") {
		t.Fatalf("unknown exec: exit %d %s", code, errOut)
	}
	if _, _, code := actl(t, nil, "audit", "show", "--log", path); code != exitUsage {
		t.Fatalf("no exec id: exit %d", code)
	}
	if _, _, code := actl(t, nil, "audit", "bogus"); code != exitUsage {
		t.Fatalf("unknown subcommand: exit %d", code)
	}
}

// TestAuditAcrossRotation: verify and show follow the links through
// rotated files; a removed rotated file is named.
func TestAuditAcrossRotation(t *testing.T) {
	path := writeLog(t, 4096)
	out, _, code := actl(t, nil, "audit", "verify", path)
	if code != 0 || !strings.Contains(out, "audit.log.1 (seq 0..") {
		t.Fatalf("exit %d\n%s", code, out)
	}
	if out, _, code := actl(t, nil, "audit", "show", "--log", path, execOK); code != 0 || !strings.Contains(out, "9. reap") {
		t.Fatalf("show across files: exit %d\n%s", code, out)
	}
	if err := os.Remove(path + ".1"); err != nil {
		t.Fatal(err)
	}
	out, _, code = actl(t, nil, "audit", "verify", path)
	if code != exitAuditBroken || !strings.Contains(out, "missing-file") || !strings.Contains(out, "audit.log.1") {
		t.Fatalf("missing rotated file: exit %d\n%s", code, out)
	}
	if out, _, code := actl(t, nil, "audit", "verify", "--partial", path); code != 0 || !strings.Contains(out, "not checked") {
		t.Fatalf("--partial: exit %d\n%s", code, out)
	}
}

// A fact the step's type does not define, or a required one that is
// missing, is a precise verify error (the chain itself is intact), and show
// still prints the fact.
func TestAuditFactErrors(t *testing.T) {
	path := writeLogWith(t, 0, map[string]any{"a_new_fact": "kept"})
	out, _, code := actl(t, nil, "audit", "verify", path)
	if code != exitAuditBroken || !strings.Contains(out, "audit log intact") ||
		!strings.Contains(out, `1 record(s) not as the schema says`) || !strings.Contains(out, `reap facts: unknown fact "a_new_fact"`) {
		t.Fatalf("verify: exit %d\n%s", code, out)
	}
	out, _, code = actl(t, nil, "audit", "verify", "--json", path)
	var v struct {
		Intact     bool `json:"intact"`
		FactsValid bool `json:"facts_valid"`
		Logs       []struct {
			Report audit.Report `json:"report"`
		} `json:"logs"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != exitAuditBroken || !v.Intact || v.FactsValid ||
		len(v.Logs) != 1 || len(v.Logs[0].Report.FactErrors) != 1 || v.Logs[0].Report.FactErrors[0].Step != "reap" {
		t.Fatalf("--json: exit %d, %v: %s", code, err, out)
	}
	out, _, code = actl(t, nil, "audit", "show", "--log", path, execOK)
	if code != 0 || !strings.Contains(out, "other facts: a_new_fact=kept") || !strings.Contains(out, `NOT AS THE SCHEMA SAYS: reap facts: unknown fact "a_new_fact"`) ||
		!strings.Contains(out, "outcome: ran: exit code 0 after 41 ms") {
		t.Fatalf("show: exit %d\n%s", code, out)
	}

	// An ok exec record without the attestation it must carry.
	path = filepath.Join(t.TempDir(), "audit.log")
	w, err := audit.Open(path, audit.Options{Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(audit.Record{ExecID: execOK, Step: audit.StepExec, Source: audit.SourceNsinit, OK: true,
		Facts: &facts.Exec{Argv: []string{"/usr/bin/bwrap", "--"}, BwrapEnv: []string{"PATH=/usr/bin"}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, _, code = actl(t, nil, "audit", "verify", path)
	if code != exitAuditBroken || !strings.Contains(out, "exec facts: missing mounts_sha256, profile_sha256, helper_version, code_sha256") {
		t.Fatalf("verify of an exec record without attestation: exit %d\n%s", code, out)
	}
}

// TestAuditShowWarmExec: a warm exec's story has both halves: its own
// records (accept, decide, warm_exec, reap) and its warm sandbox's launch
// (prepare … exec, reap taken_by), whose attestation is the summary's.
func TestAuditShowWarmExec(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := audit.Open(path, audit.Options{Version: "1.2.3"})
	if err != nil {
		t.Fatal(err)
	}
	sha := strings.Repeat("ab", 32)
	const launch, exec = "5a5a000000000000000000000000000a", "e1e1000000000000000000000000000e"
	c := func(id, step, source string, facts map[string]any) {
		t.Helper()
		if err := w.Write(audit.Record{ExecID: id, Step: step, Source: source, CallerUID: 1001, OK: true, Facts: facts}); err != nil {
			t.Fatal(err)
		}
	}
	limits := map[string]any{"timeout_ms": 5000, "memory_bytes": 1 << 30}
	c(launch, "prepare", "supervisor", map[string]any{"workspace": "/w/" + launch, "workspace_kind": "one-shot", "files": 0, "file_bytes": 0,
		"stdio": "pipes", "cgroup_mode": "v1", "kernel": "warm", "limits": map[string]any{"timeout_ms": 30000, "memory_bytes": 2 << 30}})
	c(launch, "exec", "nsinit", map[string]any{"argv": []string{"/usr/bin/bwrap"}, "bwrap_env": []string{"PATH=/usr/bin"},
		"payload_env_names": []string{"PATH"}, "mounts_sha256": "cd" + sha[2:], "profile_sha256": sha, "helper_version": "0.1.0", "code_sha256": sha, "t_us": 1300})
	c(exec, "accept", "supervisor", map[string]any{"method": "POST", "path": "/v1/exec", "body_bytes": 45})
	c(exec, "decide", "supervisor", map[string]any{"runtime": "python", "limits": limits})
	c(exec, "warm_exec", "supervisor", map[string]any{"launch_id": launch, "runtime": "python", "files": 1, "file_bytes": 2, "limits": limits, "warm": true})
	c(exec, "reap", "supervisor", map[string]any{"exit_code": 0, "duration_ms": 9, "warm": true, "launch_id": launch})
	c(launch, "reap", "supervisor", map[string]any{"warm": true, "taken_by": exec, "stopped": "exited", "pid_namespace_gone": true})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := actl(t, nil, "audit", "show", "--log", path, exec)
	if code != 0 {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	for _, want := range []string{
		"outcome: ran: exit code 0 after 9 ms",
		"held to: profile sha256 " + sha + ", mounts sha256 cd",
		`limits {"memory_bytes":1073741824,"timeout_ms":5000}`, // the exec's, as set on the warm cgroup
		"3. warm_exec", "Handed to the warm python sandbox " + launch,
		"warm sandbox " + launch + ": built before the exec",
		"1. prepare", "A runner's launch: warm.", "The warm sandbox was taken by exec " + exec + ".",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	out, _, code = actl(t, nil, "audit", "show", "--json", "--log", path, exec)
	var v struct {
		Records    []map[string]any `json:"records"`
		WarmLaunch struct {
			LaunchID string           `json:"launch_id"`
			Records  []map[string]any `json:"records"`
		} `json:"warm_launch"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || len(v.Records) != 4 || v.WarmLaunch.LaunchID != launch || len(v.WarmLaunch.Records) != 3 {
		t.Fatalf("--json: exit %d %v\n%s", code, err, out)
	}
}
