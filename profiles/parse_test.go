package profiles

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// minimal wraps syscall rules in an otherwise valid profile.
func minimal(rules string) string {
	return `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":38,"syscalls":[` + rules + `]}`
}

func TestParseRejects(t *testing.T) {
	tests := []struct {
		name, json, want string
	}{
		{"bad json", `{"defaultAction":`, "decode"},
		{"not an object", `[]`, "decode"},
		{"trailing comma", `{"defaultAction":"SCMP_ACT_ERRNO",}`, "decode"},
		{"trailing data", `{"defaultAction":"SCMP_ACT_ERRNO"} {}`, "trailing data"},
		{"trailing garbage", `{"defaultAction":"SCMP_ACT_ERRNO"} x`, "decode"},
		{"empty object", `{}`, "defaultAction is required"},
		{"null", `null`, "defaultAction is required"},
		{"unknown top-level field", `{"defaultAction":"SCMP_ACT_ERRNO","defaultErrno":1}`, `unknown field "defaultErrno"`},
		{"unknown rule field", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","priority":1}`), `unknown field "priority"`},
		{"unknown filter field", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"kernel":"5.4"}}`), `unknown field "kernel"`},
		{"unknown arg field", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":1,"op":"SCMP_CMP_EQ","mask":1}]}`), `unknown field "mask"`},
		{"duplicate key", `{"defaultAction":"SCMP_ACT_ERRNO","defaultAction":"SCMP_ACT_ALLOW"}`, "duplicate key"},
		{"duplicate key differing in case", `{"defaultAction":"SCMP_ACT_ERRNO","DefaultAction":"SCMP_ACT_ALLOW"}`, "duplicate key"},
		{"duplicate key in a rule", minimal(`{"names":["read"],"action":"SCMP_ACT_ERRNO","action":"SCMP_ACT_ALLOW"}`), "duplicate key"},
		{"unknown default action", `{"defaultAction":"SCMP_ACT_DENY"}`, `unknown action "SCMP_ACT_DENY"`},
		{"lowercase action", `{"defaultAction":"scmp_act_errno"}`, "unknown action"},
		{"unknown rule action", minimal(`{"names":["read"],"action":"SCMP_ACT_PERMIT"}`), `unknown action "SCMP_ACT_PERMIT"`},
		{"missing rule action", minimal(`{"names":["read"]}`), "action is required"},
		{"notify default", `{"defaultAction":"SCMP_ACT_NOTIFY"}`, "not supported"},
		{"notify rule", minimal(`{"names":["read"],"action":"SCMP_ACT_NOTIFY"}`), "not supported"},
		{"listener", `{"defaultAction":"SCMP_ACT_ERRNO","listenerPath":"/run/agent.sock"}`, "listenerPath"},
		{"errnoRet on allow", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","errnoRet":1}`), "errnoRet is only valid"},
		{"defaultErrnoRet on kill", `{"defaultAction":"SCMP_ACT_KILL","defaultErrnoRet":1}`, "errnoRet is only valid"},
		{"errno out of range", minimal(`{"names":["read"],"action":"SCMP_ACT_ERRNO","errnoRet":5000}`), "out of range"},
		{"unknown flag", `{"defaultAction":"SCMP_ACT_ERRNO","flags":["SECCOMP_FILTER_FLAG_NEW_LISTENER"]}`, "unsupported flag"},
		{"unknown architecture", `{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86_65"]}`, `unknown arch "SCMP_ARCH_X86_65"`},
		{"unknown archMap arch", `{"defaultAction":"SCMP_ACT_ERRNO","archMap":[{"architecture":"SCMP_ARCH_VAX","subArchitectures":[]}]}`, `unknown arch "SCMP_ARCH_VAX"`},
		{"unknown sub-architecture", `{"defaultAction":"SCMP_ACT_ERRNO","archMap":[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":["SCMP_ARCH_I386"]}]}`, `unknown sub-architecture "SCMP_ARCH_I386"`},
		{"architectures and archMap", `{"defaultAction":"SCMP_ACT_ERRNO","architectures":["SCMP_ARCH_X86"],"archMap":[{"architecture":"SCMP_ARCH_X86_64","subArchitectures":[]}]}`, "both architectures and archMap"},
		{"unknown includes arch", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"arches":["x86_64"]}}`), `unknown arch "x86_64"`},
		{"unknown excludes arch", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","excludes":{"arches":["i386"]}}`), `unknown arch "i386"`},
		{"unknown capability", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"caps":["CAP_SYS_GOD"]}}`), `unknown capability "CAP_SYS_GOD"`},
		{"capability without prefix", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","excludes":{"caps":["SYS_ADMIN"]}}`), "unknown capability"},
		{"bad minKernel", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"minKernel":"5"}}`), "invalid kernel version"},
		{"zero minKernel", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW","includes":{"minKernel":"0.0"}}`), "invalid kernel version"},
		{"unknown op", minimal(`{"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0,"op":"SCMP_CMP_IN"}]}`), `unknown op "SCMP_CMP_IN"`},
		{"missing op", minimal(`{"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":0}]}`), "unknown op"},
		{"arg index", minimal(`{"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":6,"value":0,"op":"SCMP_CMP_EQ"}]}`), "index 6 out of range"},
		{"valueTwo without masked op", minimal(`{"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":8,"valueTwo":8,"op":"SCMP_CMP_EQ"}]}`), "valueTwo"},
		{"negative value", minimal(`{"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":-1,"op":"SCMP_CMP_EQ"}]}`), "decode"},
		{"name and names", minimal(`{"name":"read","names":["write"],"action":"SCMP_ACT_ALLOW"}`), "both name and names"},
		{"no names", minimal(`{"names":[],"action":"SCMP_ACT_ALLOW"}`), "no syscall names"},
		{"empty name", minimal(`{"names":[""],"action":"SCMP_ACT_ALLOW"}`), "invalid syscall name"},
		{"null rule", minimal(`null`), "null rule"},
		{"deny of unknown syscall under allow default", `{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["no_such_syscall"],"action":"SCMP_ACT_ERRNO"}]}`, "would allow it"},
		{"unconditional rule overriding conditional ones", minimal(`{"names":["personality"],"action":"SCMP_ACT_ALLOW","args":[{"index":0,"value":8,"op":"SCMP_CMP_EQ"}]},{"names":["personality"],"action":"SCMP_ACT_ERRNO","errnoRet":1}`), "unconditional rule"},
		{"unconditional allow hiding a conditional deny", minimal(`{"names":["personality"],"action":"SCMP_ACT_ALLOW"},{"names":["personality"],"action":"SCMP_ACT_ERRNO","errnoRet":1,"args":[{"index":0,"value":8,"op":"SCMP_CMP_EQ"}]}`), "unconditional rule"},
		{"two unconditional actions", minimal(`{"names":["read"],"action":"SCMP_ACT_ALLOW"},{"names":["read"],"action":"SCMP_ACT_ERRNO","errnoRet":1}`), "unconditional rule"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Parse([]byte(tt.json), "test.json")
			if err == nil {
				t.Fatalf("Parse accepted %s: %+v", tt.json, p.Seccomp)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "profiles: test.json: ") {
				t.Errorf("error %q does not name the profile", err)
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	raw := []byte(`{
		"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 38,
		"flags": ["SECCOMP_FILTER_FLAG_TSYNC"],
		"syscalls": [
			{"name": "read", "action": "SCMP_ACT_ALLOW", "comment": "old single-name form"},
			{"names": ["no_such_allowed_syscall"], "action": "SCMP_ACT_ALLOW"},
			{"names": ["no_such_denied_syscall", "write"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1},
			{"names": ["getpid"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38, "comment": "same as the default: skipped"},
			{"names": ["personality"], "action": "SCMP_ACT_ALLOW", "args": [
				{"index": 0, "value": 8, "op": "SCMP_CMP_EQ"}, {"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}]},
			{"names": ["socket"], "action": "SCMP_ACT_ALLOW", "args": [
				{"index": 0, "value": 1, "op": "SCMP_CMP_EQ"}, {"index": 1, "value": 255, "valueTwo": 1, "op": "SCMP_CMP_MASKED_EQ"}]}
		]
	}`)
	p, err := Parse(raw, "ok.json")
	noErr(t, err)
	sum := sha256.Sum256(raw)
	equal(t, hex.EncodeToString(sum[:]), p.SHA256)
	equal(t, "ok.json", p.Name)
	// The unknown deny is recorded, the unknown allow silently dropped.
	equal(t, "no_such_denied_syscall(SCMP_ACT_ERRNO:1)", strings.Join(p.Skipped, ","))
	equal(t, "read", p.Seccomp.Syscalls[0].Names[0]) // "name" normalised to "names"

	rules := map[string][]planRule{}
	for _, r := range p.plan.rules {
		rules[r.name] = append(rules[r.name], r)
	}
	if _, ok := rules["getpid"]; ok {
		t.Error("a rule equal to the default action was not skipped")
	}
	// runc semantics: two comparisons of one argument are two rules (OR)...
	equal(t, 2, len(rules["personality"][0].conds))
	// ... comparisons of different arguments one rule (AND).
	equal(t, 1, len(rules["socket"][0].conds))
	equal(t, 2, len(rules["socket"][0].conds[0]))

	prog, err := p.BPF()
	noErr(t, err)
	vm := decodeProg(t, prog)
	a := nativeABIs(t)[0]
	run := func(name string, args ...uint64) uint32 {
		nr, ok := a.nr(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		d := seccompData{nr: nr, arch: a.audit}
		copy(d.args[:], args)
		return runBPF(t, vm, d)
	}
	equal(t, retString(retAllow), retString(run("personality", 8)))
	equal(t, retString(retAllow), retString(run("personality", 0)))
	equal(t, retString(errnoRet(38)), retString(run("personality", 1)))
	equal(t, retString(retAllow), retString(run("socket", 1, 1)))
	equal(t, retString(errnoRet(38)), retString(run("socket", 1, 2)))
	equal(t, retString(errnoRet(38)), retString(run("socket", 2, 1)))
	equal(t, retString(errnoRet(1)), retString(run("write")))
	equal(t, retString(errnoRet(38)), retString(run("getpid")))
}

// TestResolveMatchesDocker checks the resolver against moby's own
// implementation on Docker's default profile, for several capability sets.
func TestResolveMatchesDocker(t *testing.T) {
	raw, err := json.Marshal(mobyseccomp.DefaultProfile())
	noErr(t, err)
	kv, err := kernelVersion()
	noErr(t, err)
	for _, caps := range [][]string{
		nil,
		{"CAP_SYS_ADMIN"},
		{"CAP_SYS_PTRACE", "CAP_SYS_CHROOT"},
		{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID",
			"CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"},
		slices.Collect(func(yield func(string) bool) {
			for c := range knownCaps {
				if !yield(c) {
					return
				}
			}
		}),
	} {
		var doc mobyseccomp.Seccomp
		noErr(t, json.Unmarshal(raw, &doc))
		ours, err := resolve(&doc, nativeArch(), caps, kv)
		noErr(t, err)
		theirs, err := mobyseccomp.LoadProfile(string(raw), &specs.Spec{Process: &specs.Process{
			Capabilities: &specs.LinuxCapabilities{Bounding: caps}}})
		noErr(t, err)
		if !reflect.DeepEqual(normalize(ours), normalize(theirs)) {
			t.Errorf("caps %v: resolution differs from moby's\nours:   %+v\ntheirs: %+v", caps, ours, theirs)
		}
	}
}

func normalize(s *specs.LinuxSeccomp) *specs.LinuxSeccomp {
	c := *s
	c.Syscalls = nil
	for _, r := range s.Syscalls {
		if len(r.Args) == 0 {
			r.Args = nil
		}
		c.Syscalls = append(c.Syscalls, r)
	}
	if len(c.Architectures) == 0 {
		c.Architectures = nil
	}
	return &c
}

func TestResolveConditions(t *testing.T) {
	k := func(a, b uint64) *mobyseccomp.KernelVersion { return &mobyseccomp.KernelVersion{Kernel: a, Major: b} }
	doc := &mobyseccomp.Seccomp{
		LinuxSeccomp: specs.LinuxSeccomp{DefaultAction: specs.ActErrno},
		ArchMap: []mobyseccomp.Architecture{
			{Arch: specs.ArchX86_64, SubArches: []specs.Arch{specs.ArchX86, specs.ArchX32}},
			{Arch: specs.ArchS390X, SubArches: []specs.Arch{specs.ArchS390}},
		},
		Syscalls: []*mobyseccomp.Syscall{
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"always"}}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"only_amd64"}}, Includes: &mobyseccomp.Filter{Arches: []string{"amd64", "x32"}}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"not_s390x"}}, Excludes: &mobyseccomp.Filter{Arches: []string{"s390", "s390x"}}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"needs_admin_and_ptrace"}}, Includes: &mobyseccomp.Filter{Caps: []string{"CAP_SYS_ADMIN", "CAP_SYS_PTRACE"}}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"without_admin_or_ptrace"}}, Excludes: &mobyseccomp.Filter{Caps: []string{"CAP_SYS_ADMIN", "CAP_SYS_PTRACE"}}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"kernel_4_8"}}, Includes: &mobyseccomp.Filter{MinKernel: k(4, 8)}},
			{LinuxSyscall: specs.LinuxSyscall{Names: []string{"before_5_10"}}, Excludes: &mobyseccomp.Filter{MinKernel: k(5, 10)}},
			{Name: "legacy_name", LinuxSyscall: specs.LinuxSyscall{}},
		},
	}
	tests := []struct {
		arch   string
		caps   []string
		kernel *mobyseccomp.KernelVersion
		arches []specs.Arch
		names  []string
	}{
		{"amd64", nil, k(6, 1), []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
			[]string{"always", "only_amd64", "not_s390x", "without_admin_or_ptrace", "kernel_4_8", "legacy_name"}},
		{"s390x", nil, k(4, 7), []specs.Arch{specs.ArchS390X, specs.ArchS390},
			[]string{"always", "without_admin_or_ptrace", "before_5_10", "legacy_name"}},
		{"amd64", []string{"CAP_SYS_ADMIN"}, k(5, 10), []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
			[]string{"always", "only_amd64", "not_s390x", "kernel_4_8", "legacy_name"}},
		{"amd64", []string{"CAP_SYS_ADMIN", "CAP_SYS_PTRACE"}, k(5, 9), []specs.Arch{specs.ArchX86_64, specs.ArchX86, specs.ArchX32},
			[]string{"always", "only_amd64", "not_s390x", "needs_admin_and_ptrace", "kernel_4_8", "before_5_10", "legacy_name"}},
		{"arm64", nil, k(6, 1), nil,
			[]string{"always", "not_s390x", "without_admin_or_ptrace", "kernel_4_8", "legacy_name"}},
	}
	for _, tt := range tests {
		out, err := resolve(doc, tt.arch, tt.caps, *tt.kernel)
		noErr(t, err)
		var names []string
		for _, s := range out.Syscalls {
			names = append(names, s.Names...)
		}
		if !slices.Equal(tt.names, names) {
			t.Errorf("%s caps=%v kernel=%s: names %v, want %v", tt.arch, tt.caps, tt.kernel, names, tt.names)
		}
		if !slices.Equal(tt.arches, out.Architectures) {
			t.Errorf("%s: architectures %v, want %v", tt.arch, out.Architectures, tt.arches)
		}
	}
	if doc.Syscalls[7].Names != nil {
		t.Error("resolve modified its input")
	}
}

func TestParseKernelRelease(t *testing.T) {
	for release, want := range map[string]mobyseccomp.KernelVersion{
		"6.18.44-fc-v782": {Kernel: 6, Major: 18},
		"3.12-1-amd64":    {Kernel: 3, Major: 12},
		"5.4":             {Kernel: 5, Major: 4},
	} {
		got, err := parseKernelRelease(release)
		noErr(t, err)
		equal(t, want, got, release)
	}
	if _, err := parseKernelRelease("linux"); err == nil {
		t.Error("parsed a release without a version")
	}
}

func TestCheckDuplicateKeys(t *testing.T) {
	for doc, dup := range map[string]bool{
		`{"a":1,"b":{"a":2},"c":[{"a":1},{"a":2}]}`:            false,
		`{"a":{"x":[1,{"y":2}],"x2":3},"b":[[{"k":1,"K":2}]]}`: true,
		`{"a":[],"b":{},"a":0}`:                                true,
		`["a","a"]`:                                            false,
		`{"s":"a","a":"s"}`:                                    false,
	} {
		err := checkDuplicateKeys([]byte(doc))
		if (err != nil) != dup {
			t.Errorf("%s: err=%v, want duplicate=%v", doc, err, dup)
		}
	}
}

func TestEmbeddedAndLoad(t *testing.T) {
	for _, name := range []string{PayloadName, WorkerName} {
		emb, err := Embedded(name)
		noErr(t, err)
		disk, err := os.ReadFile(name)
		noErr(t, err)
		if string(emb) != string(disk) {
			t.Errorf("embedded %s differs from the file", name)
		}
		emb[0] = 'X' // a copy: callers cannot corrupt the embedded profile
		again, _ := Embedded(name)
		equal(t, byte('{'), again[0])

		p, err := Load(name)
		noErr(t, err)
		equal(t, name, p.Name)
		sum := sha256.Sum256(disk)
		equal(t, hex.EncodeToString(sum[:]), p.SHA256)
	}
	if _, err := Embedded("docker-default.json"); err == nil {
		t.Error("Embedded accepted an unknown name")
	}
	if _, err := Embedded("../profiles/payload.json"); err == nil {
		t.Error("Embedded accepted a path")
	}
	dir := t.TempDir()
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load(dir): %v", err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	noErr(t, unix.Mkfifo(fifo, 0o600))
	if _, err := Load(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("Load(fifo): %v", err) // and above all: it returned
	}
	if _, err := Load(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
	big := filepath.Join(dir, "big.json")
	noErr(t, os.WriteFile(big, []byte(`{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[]}`+strings.Repeat(" ", MaxProfileSize)), 0o644))
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("Load(big): %v", err)
	}
	var zero Profile
	if _, err := zero.BPF(); err == nil {
		t.Error("BPF on a zero Profile succeeded")
	}
	if err := zero.Install(); err == nil {
		t.Error("Install on a zero Profile succeeded")
	}
}

// TestPayloadProfileShape checks the generated payload.json against the
// requirements, on the JSON itself (what a reviewer reads).
func TestPayloadProfileShape(t *testing.T) {
	var doc mobyseccomp.Seccomp
	raw, _ := Embedded(PayloadName)
	noErr(t, json.Unmarshal(raw, &doc))
	equal(t, specs.ActErrno, doc.DefaultAction)
	if doc.DefaultErrnoRet == nil || *doc.DefaultErrnoRet != 38 {
		t.Fatalf("defaultErrnoRet %v, want 38 (ENOSYS)", doc.DefaultErrnoRet)
	}
	denied := map[string]bool{}
	for _, s := range doc.Syscalls {
		for _, n := range s.Names {
			if s.Action == specs.ActAllow && slices.Contains(payloadDenied, n) && n != "personality" {
				t.Errorf("%s is allowed by %+v", n, s.LinuxSyscall)
			}
			if s.Action == specs.ActErrno && s.ErrnoRet != nil && *s.ErrnoRet == 1 && len(s.Args) == 0 && s.Includes == nil && s.Excludes == nil {
				denied[n] = true
			}
			if s.Includes != nil && len(s.Includes.Caps) > 0 || s.Excludes != nil && len(s.Excludes.Caps) > 0 {
				t.Errorf("capability condition left in the payload profile: %+v", s)
			}
		}
	}
	for _, n := range payloadDenied {
		if !denied[n] {
			t.Errorf("no explicit EPERM rule for %s", n)
		}
	}
	for _, n := range []string{"clone3"} {
		found := false
		for _, s := range doc.Syscalls {
			if slices.Contains(s.Names, n) && s.Action == specs.ActErrno && *s.ErrnoRet == 38 {
				found = true
			}
		}
		isTrue(t, found, "%s must answer ENOSYS", n)
	}
}

// TestWorkerProfileShape pins what kubernetes-worker.json adds to Docker's
// default profile resolved without CAP_SYS_ADMIN.
func TestWorkerProfileShape(t *testing.T) {
	raw, _ := Embedded(WorkerName)
	worker, err := Parse(raw, WorkerName)
	noErr(t, err)
	dockerRaw, _ := json.Marshal(mobyseccomp.DefaultProfile())
	docker, err := Parse(dockerRaw, "docker.json")
	noErr(t, err)
	uncond := func(p *Profile) map[string]specs.LinuxSeccompAction {
		m := map[string]specs.LinuxSeccompAction{}
		for _, s := range p.Seccomp.Syscalls {
			if len(s.Args) == 0 {
				for _, n := range s.Names {
					m[n] = s.Action
				}
			}
		}
		return m
	}
	w, d := uncond(worker), uncond(docker)
	var added []string
	for n, a := range w {
		if a == specs.ActAllow && d[n] != specs.ActAllow {
			added = append(added, n)
		}
	}
	for n, a := range d {
		if a == specs.ActAllow && w[n] != specs.ActAllow {
			t.Errorf("worker profile lost Docker's %s", n)
		}
	}
	slices.Sort(added)
	want := []string{"clone", "mount", "pivot_root", "sethostname", "setns", "umount2", "unshare"}
	if !slices.Equal(want, added) {
		t.Errorf("worker adds %v to Docker's default, want exactly %v", added, want)
	}
	equal(t, specs.ActErrno, worker.Seccomp.DefaultAction)
	equal(t, uint(1), *worker.Seccomp.DefaultErrnoRet)
	var doc mobyseccomp.Seccomp
	noErr(t, json.Unmarshal(raw, &doc))
	for _, s := range doc.Syscalls {
		for _, f := range []*mobyseccomp.Filter{s.Includes, s.Excludes} {
			if f != nil && slices.Contains(f.Caps, "CAP_SYS_ADMIN") {
				t.Errorf("CAP_SYS_ADMIN condition left in the worker profile: %+v", s)
			}
		}
	}
}
