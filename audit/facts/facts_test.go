package facts_test

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/policy"
)

// The helper's typed facts marshal to the same JSON object the map it
// replaced did (member order aside), so readers of older and newer records
// see the same facts.
func TestHelperFactsJSONAsBefore(t *testing.T) {
	enter := &facts.Enter{ExecID: "x", CallerUID: 0, Runtime: "python", Probe: false, HelperVersion: "v", Config: "/etc/c",
		ConfigSHA256: "s", EUID: 998, EGID: 998, UIDMap: "1000 998 1", GIDMap: "1000 998 1", Setgroups: "deny", HolderPID: 7,
		PreludeUS: 120, UsernsInode: 4026532001, OwnUsernsInode: 4026531837, Workspace: "w"}
	enter.Stamp(900)
	before := map[string]any{"exec_id": "x", "caller_uid": 0, "runtime": "python", "probe": false, "helper_version": "v",
		"config": "/etc/c", "config_sha256": "s", "euid": 998, "egid": 998, "uid_map": "1000 998 1", "gid_map": "1000 998 1",
		"setgroups": "deny", "holder_pid": 7, "prelude_us": 120, "userns_inode": 4026532001, "own_userns_inode": 4026531837,
		"workspace": "w", "t_us": 900}
	sameJSON(t, enter, before)

	// A step that failed before it observed anything says only when.
	failed := &facts.Drop{}
	failed.Stamp(5)
	sameJSON(t, failed, map[string]any{"t_us": 5})

	// A prelude failure at network carries the enter facts gathered so far.
	pre := &facts.Enter{ExecID: "x", Runtime: "python", Setgroups: "deny"}
	nf := &facts.Network{Enter: pre}
	nf.Stamp(3)
	sameJSON(t, nf, map[string]any{"exec_id": "x", "caller_uid": 0, "runtime": "python", "probe": false, "helper_version": "",
		"config": "", "config_sha256": "", "euid": 0, "egid": 0, "uid_map": "", "gid_map": "", "setgroups": "deny",
		"holder_pid": 0, "prelude_us": 0, "t_us": 3})
	if nf.Step() != facts.StepNetwork {
		t.Fatalf("a prelude failure at network is a %s record", nf.Step())
	}
}

func sameJSON(t *testing.T, typed any, old map[string]any) {
	t.Helper()
	a, _ := json.Marshal(typed)
	b, _ := json.Marshal(old)
	var x, y any
	_ = json.Unmarshal(a, &x)
	_ = json.Unmarshal(b, &y)
	if !reflect.DeepEqual(x, y) {
		t.Fatalf("typed facts marshal as\n %s\nthe map did as\n %s", a, b)
	}
}

// facts.Limits mirrors policy.Limits (the helper must not link policy):
// the supervisor's limits decode strictly into it, field for field.
func TestLimitsMirrorPolicy(t *testing.T) {
	pt, ft := reflect.TypeOf(policy.Limits{}), reflect.TypeOf(facts.Limits{})
	if pt.NumField() != ft.NumField() {
		t.Fatalf("policy.Limits has %d fields, facts.Limits %d", pt.NumField(), ft.NumField())
	}
	for i := 0; i < pt.NumField(); i++ {
		p, f := pt.Field(i), ft.Field(i)
		if p.Tag.Get("json") != f.Tag.Get("json") || p.Type != f.Type {
			t.Errorf("field %d: policy %s %s %q, facts %s %s %q", i, p.Name, p.Type, p.Tag.Get("json"), f.Name, f.Type, f.Tag.Get("json"))
		}
	}
	l := policy.Limits{TimeoutMS: 1, OutputLimitBytes: 2, TmpSizeBytes: 3, MemoryBytes: 4, Pids: 5, CPUs: 1.5, NoFile: 6, FileSizeBytes: 7}
	raw, _ := json.Marshal(map[string]any{"session": false, "runtime": "python", "code_bytes": 1, "code_sha256": "s", "limits": l})
	f, err := facts.Decode(facts.StepDecide, true, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := *f.(*facts.Decide).Limits; got != (facts.Limits{TimeoutMS: 1, OutputLimitBytes: 2, TmpSizeBytes: 3, MemoryBytes: 4, Pids: 5, CPUs: 1.5, NoFile: 6, FileSizeBytes: 7}) {
		t.Fatalf("limits decoded as %+v", got)
	}
}

func TestDecode(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		ok         bool
		raw, err   string
	}{
		{"no facts on a failed prepare", facts.StepPrepare, false, ``, ""},
		{"null facts", facts.StepPrepare, false, `null`, ""},
		{"no facts on an ok prepare", facts.StepPrepare, true, ``, "missing workspace, workspace_kind, limits"},
		{"unknown fact", facts.StepReap, true, `{"exit_code":0,"colour":1}`, `unknown fact "colour"`},
		{"wrong type", facts.StepSeccomp, false, `{"profile":7}`, "profile"},
		{"always, even when failed", facts.StepInterrupted, false, `{"last_step":"exec"}`, "missing last_seq, accepted_at, found_at_start_seq"},
		{"failed exec needs no attestation", facts.StepExec, false, `{"t_us":1}`, ""},
		{"trailing data", facts.StepAccept, false, `{"method":"GET","path":"/"} {}`, "trailing"},
		{"not an object", facts.StepAccept, false, `[1]`, "accept facts"},
		{"untyped step", "stop", true, `{"reason":"shutdown"}`, "no typed facts"},
		{"a session record as written before it was typed", facts.StepSessionCreate, true, `{"key_sha256":"","restored":false,"session_id":"s","ttl_seconds":60,"workspace":"/w"}`, ""},
		{"a settings change as written before it was typed", facts.StepSettingsChange, true, `{"changes":{"max_sessions":{"new":1,"old":64,"source":"admin"}}}`, ""},
		{"a refused file put", facts.StepFilePut, false, `{"path":"a","session_id":"s"}`, ""},
		{"an ok file put without its size", facts.StepFilePut, true, `{"path":"a","session_id":"s"}`, "missing size, sha256"},
		{"a health probe's decide", facts.StepDecide, true, `{"runtime":"probe","limits":{"timeout_ms":5000},"probe":true}`, ""},
		{"a refused probe's decide", facts.StepDecide, false, ``, ""},
		{"reap: why the wait stopped, quota unmeasurable", facts.StepReap, true, `{"exit_code":0,"stopped":"quota","quota_exceeded":true,"quota_error":"statfs: EIO","probe":true}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := facts.Decode(tc.step, tc.ok, []byte(tc.raw))
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Decode: %v, want %q", err, tc.err)
			}
		})
	}
}

var placeholder = regexp.MustCompile(`\{([a-z0-9_/]+)(\|[^}]*)?\}`)

// Every fact of every step is named by one of its sentences, so `sandboxctl
// audit show` says what each asserts and a new fact cannot be added without
// its sentence ("other facts" is for facts the schema does not know).
func TestEveryFactHasASentence(t *testing.T) {
	for _, f := range facts.All() {
		named := map[string]bool{"t_us": true} // Describe's own trailer
		for _, s := range f.Sentences() {
			for _, m := range placeholder.FindAllStringSubmatch(s.Text, -1) {
				for _, n := range strings.Split(m[1], "/") {
					named[n] = true
				}
			}
		}
		for _, fd := range facts.Fields(f) {
			if !named[fd.Name] {
				t.Errorf("%s: fact %s is in no sentence", f.Step(), fd.Name)
			}
		}
	}
}

func TestDescribe(t *testing.T) {
	raw := []byte(`{"exit_code":null,"signal":"SIGKILL","timed_out":true,"duration_ms":5000,"stdout_bytes":0,"a_new_fact":"kept"}`)
	got := strings.Join(facts.Describe(facts.StepReap, true, raw, nil), "\n")
	for _, want := range []string{
		"The payload ended: exit code -, signal SIGKILL, timed out: yes, after 5000 ms",
		`NOT AS THE SCHEMA SAYS: reap facts: unknown fact "a_new_fact"`,
		"other facts: a_new_fact=kept",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "helper exited") {
		t.Errorf("a failure-only sentence on an ok record:\n%s", got)
	}
	if r, _ := facts.Lenient(facts.StepReap, raw).(*facts.Reap); r == nil || r.Outcome() != "timed out and was killed with SIGKILL after 5000 ms" {
		t.Errorf("outcome %+v", r)
	}
	// A flag omitted as false reads "no", a count omitted as zero "0": the
	// schema's omitzero makes their absence a value, not an unknown.
	got = strings.Join(facts.Describe(facts.StepReap, true, []byte(`{"exit_code":0,"duration_ms":12}`), nil), "\n")
	if want := "The payload ended: exit code 0, signal -, timed out: no, after 12 ms; usage -; OOM-killed: no"; !strings.Contains(got, want) {
		t.Errorf("reap with its false flags omitted:\n%s\nwant %q", got, want)
	}
	if strings.Contains(got, "A health probe") || strings.Contains(got, "warm pool sandbox") {
		t.Errorf("a sentence of absent flags only is printed:\n%s", got)
	}
	// A sentence none of whose facts is present is left out.
	if got := facts.Describe(facts.StepSeccomp, false, []byte(`{"profile":"/p"}`), nil); len(got) != 1 || !strings.HasPrefix(got[0], "Payload profile /p, sha256 -") {
		t.Errorf("seccomp with only a profile: %q", got)
	}
	got = strings.Join(facts.Describe(facts.StepArtifacts, true, []byte(`{"patterns":["*.png"],"artifacts":[{"path":"a.png","size":3,"sha256":"h"}],"truncated":false}`), nil), "\n")
	if !strings.Contains(got, "Artifacts for patterns [*.png] (truncated: no):\n  a.png, 3 bytes, sha256 h") {
		t.Errorf("artifacts:\n%s", got)
	}
	got = strings.Join(facts.Describe(facts.StepExec, true, []byte(`{"argv":["bwrap","--setenv","A","x y","--"]}`), nil), "\n")
	if !strings.Contains(got, `bwrap --setenv A "x y" --`) {
		t.Errorf("argv:\n%s", got)
	}
}
