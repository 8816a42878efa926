package nsinit

import (
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/nsinit/config"
)

func testConfig() *config.Config {
	c := config.Default("/var/lib/sandboxd/workspaces", "/usr/libexec/sandboxd/sandboxd-exec", "/etc/sandboxd/payload.json")
	return &c
}

// Distinct fd numbers, so that each option can be checked for its own fd.
var testFDs = BwrapFDs{Userns: 6, Seccomp: 7, Status: 5, Workspace: 8, Env: 9, Code: 10}

// bwrapArity is the number of arguments each option BwrapArgs may emit takes
// (bubblewrap.c parse_args_recurse). An option not in this table is a test
// failure: a new option must be reviewed and added here.
var bwrapArity = map[string]int{
	"--userns": 1, "--uid": 1, "--gid": 1,
	"--unshare-pid": 0, "--unshare-ipc": 0, "--unshare-uts": 0, "--unshare-cgroup-try": 0,
	"--hostname": 1, "--die-with-parent": 0, "--new-session": 0,
	"--cap-drop": 1, "--clearenv": 0,
	"--ro-bind-try": 2, "--symlink": 2, "--proc": 1, "--dir": 1, "--dev-bind-try": 2,
	"--size": 1, "--tmpfs": 1, "--bind-fd": 2, "--ro-bind": 2, "--ro-bind-data": 2,
	"--ro-bind-fd": 2, "--remount-ro": 1, "--chdir": 1, "--seccomp": 1, "--json-status-fd": 1,
}

type bwrapOpt struct {
	name string
	args []string
	pos  int // index of the option in argv
}

// parseBwrap reads argv the way bubblewrap does: options with their fixed
// number of arguments, up to and including "--"; the rest is the command.
func parseBwrap(t *testing.T, argv []string) (opts []bwrapOpt, command []string) {
	t.Helper()
	if len(argv) == 0 {
		t.Fatal("empty argv")
	}
	for i := 1; i < len(argv); {
		a := argv[i]
		if a == "--" {
			return opts, argv[i+1:]
		}
		n, ok := bwrapArity[a]
		if !ok {
			t.Fatalf("argv[%d] = %q: not a reviewed bwrap option (argv %q)", i, a, argv)
		}
		if i+n >= len(argv) {
			t.Fatalf("option %s at %d lacks its %d arguments", a, i, n)
		}
		opts = append(opts, bwrapOpt{name: a, args: argv[i+1 : i+1+n], pos: i})
		i += 1 + n
	}
	t.Fatalf("argv has no \"--\" separator: %q", argv)
	return nil, nil
}

func findOpts(opts []bwrapOpt, name string) []bwrapOpt {
	var out []bwrapOpt
	for _, o := range opts {
		if o.name == name {
			out = append(out, o)
		}
	}
	return out
}

// hasOpt reports whether opts holds name with exactly args.
func hasOpt(opts []bwrapOpt, name string, args ...string) bool {
	for _, o := range findOpts(opts, name) {
		if slices.Equal(o.args, args) {
			return true
		}
	}
	return false
}

// containsSeq reports whether seq appears contiguously in s.
func containsSeq(s []string, seq ...string) bool {
	for i := 0; i+len(seq) <= len(s); i++ {
		if slices.Equal(s[i:i+len(seq)], seq) {
			return true
		}
	}
	return false
}

func TestBwrapArgsGolden(t *testing.T) {
	cfg := testConfig()
	rt := cfg.Runtimes["python"]
	const tmp = 128 << 20
	argv := BwrapArgs(cfg, rt, testFDs, tmp)

	if argv[0] != cfg.Bwrap {
		t.Fatalf("argv[0] = %q, want the configured bwrap %q", argv[0], cfg.Bwrap)
	}
	sep := slices.Index(argv, "--")
	if n := strings.Count("\x00"+strings.Join(argv, "\x00")+"\x00", "\x00--\x00"); n != 1 {
		t.Fatalf("argv holds %d \"--\" elements, want exactly 1: %q", n, argv)
	}
	wantCmd := append([]string{config.SandboxDir + "/exec", config.SandboxDir + "/env"}, rt.Argv...)
	if !slices.Equal(argv[sep+1:], wantCmd) {
		t.Fatalf("after \"--\": %q, want %q", argv[sep+1:], wantCmd)
	}

	opts, cmd := parseBwrap(t, argv)
	if !slices.Equal(cmd, wantCmd) {
		t.Fatalf("bwrap would run %q, want %q", cmd, wantCmd)
	}
	options := argv[:sep]
	for _, seq := range [][]string{
		{"--userns", "6", "--uid", "1000", "--gid", "1000"},
		{"--unshare-pid"},
		{"--unshare-ipc"},
		{"--unshare-uts"},
		{"--die-with-parent"},
		{"--new-session"},
		{"--cap-drop", "ALL"},
		{"--clearenv"},
		{"--remount-ro", "/"},
		{"--seccomp", "7"},
		{"--json-status-fd", "5"},
		{"--bind-fd", "8", "/workspace"},
		{"--chdir", "/workspace"},
		{"--proc", "/proc"},
		{"--size", strconv.Itoa(tmp), "--tmpfs", "/tmp"},
		{"--size", strconv.Itoa(64 << 20), "--tmpfs", "/dev/shm"},
		{"--ro-bind", cfg.Shim, config.SandboxDir + "/exec"},
		{"--ro-bind-data", "9", config.SandboxDir + "/env"},
		{"--ro-bind-data", "10", config.SandboxDir + "/" + rt.CodeFile},
	} {
		if !containsSeq(options, seq...) {
			t.Errorf("options lack %q:\n%q", seq, options)
		}
	}
	if strconv.Itoa(PayloadID) != "1000" {
		t.Errorf("PayloadID = %d; prelude.h's SBX_PAYLOAD_ID is 1000", PayloadID)
	}

	// Each option that must appear once appears once.
	for _, name := range []string{"--userns", "--uid", "--gid", "--seccomp", "--json-status-fd", "--bind-fd",
		"--remount-ro", "--cap-drop", "--clearenv", "--die-with-parent", "--new-session", "--unshare-pid", "--chdir"} {
		if n := len(findOpts(opts, name)); n != 1 {
			t.Errorf("%s appears %d times, want once", name, n)
		}
	}
	// Nothing that would widen the sandbox.
	for _, bad := range []string{"--bind", "--dev-bind", "--dev", "--unshare-user", "--unshare-user-try",
		"--share-net", "--cap-add", "--setenv", "--unsetenv", "--args", "--as-pid-1", "--userns2", "--ro-bind-fd"} {
		if slices.Contains(options, bad) {
			t.Errorf("options contain %s", bad)
		}
	}
	// Every configured read-only bind, symlink and device.
	for _, p := range cfg.ROBinds {
		if !hasOpt(opts, "--ro-bind-try", p, p) {
			t.Errorf("ro bind %s missing", p)
		}
	}
	if n := len(findOpts(opts, "--ro-bind-try")); n != len(cfg.ROBinds) {
		t.Errorf("%d --ro-bind-try, want %d (one per configured bind)", n, len(cfg.ROBinds))
	}
	for _, s := range cfg.Symlinks {
		if !hasOpt(opts, "--symlink", s.Target, s.Path) {
			t.Errorf("symlink %+v missing", s)
		}
	}
	for _, d := range cfg.Devices {
		if !hasOpt(opts, "--dev-bind-try", d, d) {
			t.Errorf("device %s missing", d)
		}
	}
	if n := len(findOpts(opts, "--dev-bind-try")); n != len(cfg.Devices) {
		t.Errorf("%d --dev-bind-try, want %d", n, len(cfg.Devices))
	}
	// --remount-ro / comes after every mount operation that writes into /,
	// or the later ones would fail (or the root stay writable).
	remount := findOpts(opts, "--remount-ro")[0].pos
	for _, o := range opts {
		switch o.name {
		case "--ro-bind-try", "--symlink", "--proc", "--dir", "--dev-bind-try", "--tmpfs", "--bind-fd", "--ro-bind", "--ro-bind-data":
			if o.pos > remount {
				t.Errorf("%s %q comes after --remount-ro /", o.name, o.args)
			}
		}
	}
	// Each --size is immediately followed by the --tmpfs it sizes.
	for _, o := range findOpts(opts, "--size") {
		if argv[o.pos+2] != "--tmpfs" {
			t.Errorf("--size %s is followed by %q, not --tmpfs", o.args[0], argv[o.pos+2])
		}
	}
	// The user namespace is the prelude's: bwrap must not make its own.
	if slices.Contains(options, "--unshare-all") || slices.Contains(options, "--unshare-net") {
		t.Errorf("bwrap asked to make namespaces the prelude owns: %q", options)
	}
}

func TestBwrapArgsProbeOmitsCode(t *testing.T) {
	cfg := testConfig()
	fds := testFDs
	fds.Code = -1
	argv := BwrapArgs(cfg, ProbeRuntime, fds, 1<<20)
	opts, cmd := parseBwrap(t, argv)
	data := findOpts(opts, "--ro-bind-data")
	if len(data) != 1 || !slices.Equal(data[0].args, []string{"9", config.SandboxDir + "/env"}) {
		t.Fatalf("probe launch has --ro-bind-data %+v, want only the env file", data)
	}
	if slices.Contains(argv, "-1") {
		t.Fatalf("fd -1 reached bwrap's argv: %q", argv)
	}
	for _, a := range argv {
		if strings.Contains(a, ProbeRuntime.CodeFile) && a != ProbeRuntime.CodeFile {
			t.Fatalf("probe code file path %q in argv", a)
		}
	}
	want := []string{config.SandboxDir + "/exec", config.SandboxDir + "/env", "/usr/bin/true"}
	if !slices.Equal(cmd, want) {
		t.Fatalf("probe command %q, want %q", cmd, want)
	}
}

func TestBwrapArgsCodeFdZeroIsBound(t *testing.T) {
	// fd 0 is a valid descriptor: only a negative one means "no code".
	fds := testFDs
	fds.Code = 0
	cfg := testConfig()
	opts, _ := parseBwrap(t, BwrapArgs(cfg, cfg.Runtimes["javascript"], fds, 1))
	if !hasOpt(opts, "--ro-bind-data", "0", config.SandboxDir+"/main.js") {
		t.Fatalf("code fd 0 not bound: %+v", findOpts(opts, "--ro-bind-data"))
	}
}

func TestBwrapArgsEachRuntime(t *testing.T) {
	cfg := testConfig()
	for name, rt := range cfg.Runtimes {
		t.Run(name, func(t *testing.T) {
			argv := BwrapArgs(cfg, rt, testFDs, 1<<20)
			opts, cmd := parseBwrap(t, argv)
			if !hasOpt(opts, "--ro-bind-data", "10", config.SandboxDir+"/"+rt.CodeFile) {
				t.Errorf("code not bound at %s/%s", config.SandboxDir, rt.CodeFile)
			}
			if !slices.Equal(cmd[2:], rt.Argv) {
				t.Errorf("runtime argv %q, want %q", cmd[2:], rt.Argv)
			}
		})
	}
}

func TestBwrapArgsTracksConfig(t *testing.T) {
	cfg := testConfig()
	cfg.Bwrap = "/opt/bwrap/bin/bwrap"
	cfg.Shim = "/opt/sandboxd/exec"
	cfg.ROBinds = []string{"/opt/runtime"}
	cfg.Devices = nil
	cfg.Symlinks = nil
	argv := BwrapArgs(cfg, cfg.Runtimes["python"], testFDs, 42)
	opts, _ := parseBwrap(t, argv)
	if argv[0] != "/opt/bwrap/bin/bwrap" {
		t.Errorf("argv[0] = %q", argv[0])
	}
	if !hasOpt(opts, "--ro-bind", "/opt/sandboxd/exec", config.SandboxDir+"/exec") {
		t.Error("shim not bound from the configured path")
	}
	if got := findOpts(opts, "--ro-bind-try"); len(got) != 1 || got[0].args[0] != "/opt/runtime" {
		t.Errorf("ro binds %+v, want only /opt/runtime", got)
	}
	if len(findOpts(opts, "--dev-bind-try")) != 0 || len(findOpts(opts, "--symlink")) != 0 {
		t.Error("devices or symlinks appear though none are configured")
	}
	if !hasOpt(opts, "--size", "42") {
		t.Error("tmp size not passed through")
	}
	// The caller's config is not modified.
	if !reflect.DeepEqual(cfg.ROBinds, []string{"/opt/runtime"}) {
		t.Error("BwrapArgs modified the config")
	}
}

func TestBwrapArgsDoesNotAliasRuntimeArgv(t *testing.T) {
	cfg := testConfig()
	rt := config.Runtime{Argv: make([]string, 1, 8), CodeFile: "c"}
	rt.Argv[0] = "/usr/bin/x"
	a := BwrapArgs(cfg, rt, testFDs, 1)
	b := BwrapArgs(cfg, rt, testFDs, 1)
	a[len(a)-1] = "mutated"
	if b[len(b)-1] != "/usr/bin/x" || rt.Argv[0] != "/usr/bin/x" {
		t.Fatal("two argv share storage with each other or with the runtime")
	}
}

// Property: whatever the runtime argv holds (it is config, but the shim and
// the payload see it), every element of it comes after the one "--" that
// ends bwrap's options, in order and unchanged, and bwrap's own options
// parse to exactly the same list.
func TestBwrapArgsRuntimeArgvNeverParsedAsOptions(t *testing.T) {
	cfg := testConfig()
	reference, _ := parseBwrap(t, BwrapArgs(cfg, cfg.Runtimes["python"], testFDs, 1<<20))

	hostile := []string{"--bind", "/", "/", "--", "--seccomp", "-1", "--unshare-user", "--cap-add", "ALL",
		"--args", "3", "--ro-bind-data", "--userns", "--setenv", "LD_PRELOAD", "-", "-c", "", "--json-status-fd",
		"--dev-bind", "/dev", "--help", "--version", "--level-prefix", "\x00", "--bind=/", "--remount-ro"}
	cases := [][]string{
		{"/usr/bin/python3", "--bind", "/", "/"},
		{"/usr/bin/node", "--", "--seccomp", "0"},
		{"/usr/bin/x", "--"},
		{"/usr/bin/x", "--", "--"},
		{"--bind", "/", "/"}, // even a hostile argv[0]
		{"/usr/bin/x", "--args", "0"},
	}
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 500; i++ {
		n := 1 + r.Intn(8)
		argv := []string{"/usr/bin/runtime"}
		for j := 0; j < n; j++ {
			argv = append(argv, hostile[r.Intn(len(hostile))])
		}
		cases = append(cases, argv)
	}
	for i, rtArgv := range cases {
		name := fmt.Sprintf("%d", i)
		t.Run(name, func(t *testing.T) {
			rt := config.Runtime{Argv: rtArgv, CodeFile: "main.py"}
			argv := BwrapArgs(cfg, rt, testFDs, 1<<20)
			opts, cmd := parseBwrap(t, argv)
			want := append([]string{config.SandboxDir + "/exec", config.SandboxDir + "/env"}, rtArgv...)
			if !slices.Equal(cmd, want) {
				t.Fatalf("command %q, want %q", cmd, want)
			}
			if !reflect.DeepEqual(opts, reference) {
				t.Fatalf("options changed with the runtime argv %q", rtArgv)
			}
			// The first "--" is the separator, and no runtime element is before it.
			sep := slices.Index(argv, "--")
			if sep != len(argv)-len(want)-1 {
				t.Fatalf("first \"--\" at %d, want %d", sep, len(argv)-len(want)-1)
			}
		})
	}
}

// Config values that look like options are only ever arguments of an
// option with a fixed arity, so they cannot be read as options either.
func TestBwrapArgsOptionLikeConfigValues(t *testing.T) {
	cfg := testConfig()
	cfg.Symlinks = append(cfg.Symlinks, config.Symlink{Target: "--bind", Path: "/x"}, config.Symlink{Target: "--", Path: "/y"})
	rt := config.Runtime{Argv: []string{"/usr/bin/python3"}, CodeFile: "--seccomp"}
	argv := BwrapArgs(cfg, rt, testFDs, 1<<20)
	opts, cmd := parseBwrap(t, argv)
	if !hasOpt(opts, "--symlink", "--bind", "/x") {
		t.Errorf("symlink target --bind not kept as an argument: %+v", findOpts(opts, "--symlink"))
	}
	if !hasOpt(opts, "--ro-bind-data", "10", config.SandboxDir+"/--seccomp") {
		t.Errorf("code file not bound under %s", config.SandboxDir)
	}
	if len(cmd) != 3 || cmd[2] != "/usr/bin/python3" {
		t.Errorf("command %q", cmd)
	}
}

func TestPayloadEnv(t *testing.T) {
	base := []string{"PATH=/usr/bin:/bin", "HOME=/workspace", "LANG=C.UTF-8", "TMPDIR=/tmp"}
	tests := []struct {
		name          string
		base, request []string
		want          []string
	}{
		{"base only", base, nil, []string{"HOME=/workspace", "LANG=C.UTF-8", "PATH=/usr/bin:/bin", "TMPDIR=/tmp"}},
		{"request adds", base, []string{"FOO=1"}, []string{"FOO=1", "HOME=/workspace", "LANG=C.UTF-8", "PATH=/usr/bin:/bin", "TMPDIR=/tmp"}},
		{"request overrides base", base, []string{"HOME=/x", "PATH="},
			[]string{"HOME=/x", "LANG=C.UTF-8", "PATH=", "TMPDIR=/tmp"}},
		{"value with =", nil, []string{"A=b=c"}, []string{"A=b=c"}},
		{"later base entry wins", []string{"A=1", "A=2"}, nil, []string{"A=2"}},
		{"both empty", nil, nil, []string{}},
		{"override by prefix name is not an override", []string{"PATH=/bin"}, []string{"PATHX=1", "PAT=2"},
			[]string{"PAT=2", "PATH=/bin", "PATHX=1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			baseCopy := slices.Clone(tc.base)
			reqCopy := slices.Clone(tc.request)
			got := PayloadEnv(tc.base, tc.request)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("PayloadEnv = %q, want %q", got, tc.want)
			}
			if got == nil {
				t.Fatal("PayloadEnv returned nil")
			}
			if !sort.StringsAreSorted(got) {
				t.Fatalf("result not sorted: %q", got)
			}
			if !slices.Equal(tc.base, baseCopy) || !slices.Equal(tc.request, reqCopy) {
				t.Fatal("PayloadEnv modified its inputs")
			}
			// One entry per name.
			seen := map[string]bool{}
			for _, n := range EnvNames(got) {
				if seen[n] {
					t.Fatalf("name %s twice in %q", n, got)
				}
				seen[n] = true
			}
		})
	}
}

func TestPayloadEnvDeterministic(t *testing.T) {
	var base, req []string
	for i := 0; i < 50; i++ {
		base = append(base, fmt.Sprintf("B%02d=%d", i, i))
		req = append(req, fmt.Sprintf("R%02d=%d", i, i))
	}
	req = append(req, "B07=override")
	want := PayloadEnv(base, req)
	r := rand.New(rand.NewSource(2))
	for i := 0; i < 100; i++ {
		// Map iteration order differs between calls; so may the input order of
		// distinct names. The output does not.
		b, q := slices.Clone(base), slices.Clone(req)
		r.Shuffle(len(b), func(i, j int) { b[i], b[j] = b[j], b[i] })
		r.Shuffle(len(q), func(i, j int) { q[i], q[j] = q[j], q[i] })
		if got := PayloadEnv(b, q); !slices.Equal(got, want) {
			t.Fatalf("run %d: %q, want %q", i, got, want)
		}
	}
	if !slices.Contains(want, "B07=override") || slices.Contains(want, "B07=7") {
		t.Fatalf("override lost: %q", want)
	}
	if len(want) != 100 {
		t.Fatalf("%d entries, want 100", len(want))
	}
}

func TestEnvNames(t *testing.T) {
	tests := []struct {
		env  []string
		want []string
	}{
		{nil, []string{}},
		{[]string{"A=1", "B=", "C=x=y"}, []string{"A", "B", "C"}},
		{[]string{"TOKEN=secret"}, []string{"TOKEN"}},
		{[]string{"NOEQ"}, []string{"NOEQ"}},
		{[]string{"=v"}, []string{""}},
	}
	for _, tc := range tests {
		got := EnvNames(tc.env)
		if !slices.Equal(got, tc.want) || got == nil {
			t.Errorf("EnvNames(%q) = %q, want %q", tc.env, got, tc.want)
		}
		for _, n := range got {
			if strings.Contains(n, "=") || strings.Contains(n, "secret") {
				t.Errorf("EnvNames leaked a value: %q", n)
			}
		}
	}
}

// Regression: PayloadEnv sorts by name, not by the NAME=value string.
func TestPayloadEnvSortedByName(t *testing.T) {
	got := PayloadEnv([]string{"A=1"}, []string{"A1=2", "A_B=3"})
	want := []string{"A=1", "A1=2", "A_B=3"}
	if !slices.Equal(got, want) {
		t.Fatalf("PayloadEnv = %q, want sorted by name %q", got, want)
	}
}
