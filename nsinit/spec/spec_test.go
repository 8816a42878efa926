package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandboxd/sandboxd/audit/facts"
)

// validSpec returns a spec that passes Validate; each test mutates a copy.
func validSpec() LaunchSpec {
	return LaunchSpec{
		Version:      Version,
		ExecID:       "exec_01-AB",
		CallerUID:    1001,
		Runtime:      "python",
		Workspace:    "ws-1_a",
		Code:         []byte("print('héllo')\n\x01\x1b[0m\xff"),
		Network:      NetworkNone,
		TmpSizeBytes: 64 << 20,
		Process: specs.Process{
			Env: []string{"FOO=bar", "EMPTY=", "WITH_EQ=a=b=c"},
			Rlimits: []specs.POSIXRlimit{
				{Type: "RLIMIT_NOFILE", Soft: 256, Hard: 1024},
				{Type: "RLIMIT_CORE", Soft: 0, Hard: 0},
			},
		},
	}
}

func encode(t *testing.T, s LaunchSpec) []byte {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatalf("marshal spec: %v", err)
	}
	return b
}

// asMap returns the JSON object of a valid spec, for tests that need fields
// the Go type cannot express (unknown keys, missing version).
func asMap(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(encode(t, validSpec()), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func marshalMap(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeValidRoundTrip(t *testing.T) {
	want := validSpec()
	raw := encode(t, want)
	for name, decode := range map[string]func([]byte) (*LaunchSpec, error){
		"DecodeBytes": DecodeBytes,
		"Decode":      func(b []byte) (*LaunchSpec, error) { return Decode(bytes.NewReader(b)) },
		"Decode one byte at a time": func(b []byte) (*LaunchSpec, error) {
			return Decode(iotest.OneByteReader(bytes.NewReader(b)))
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := decode(raw)
			if err != nil {
				t.Fatalf("decode valid spec: %v", err)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Fatalf("round trip changed the spec:\n got %+v\nwant %+v", *got, want)
			}
			// Encoding the decoded spec again gives the same bytes.
			if again := encode(t, *got); !bytes.Equal(again, raw) {
				t.Fatalf("re-encoded spec differs:\n%s\n%s", again, raw)
			}
		})
	}
}

func TestDecodeMinimalSpec(t *testing.T) {
	raw := `{"version":1,"exec_id":"e","runtime":"probe","workspace":"w","network":"none"}`
	s, err := DecodeBytes([]byte(raw))
	if err != nil {
		t.Fatalf("minimal spec refused: %v", err)
	}
	if len(s.Code) != 0 || s.TmpSizeBytes != 0 || len(s.Process.Env) != 0 || len(s.Process.Rlimits) != 0 {
		t.Fatalf("minimal spec decoded with unexpected values: %+v", s)
	}
}

func TestDecodeTrailingWhitespaceAccepted(t *testing.T) {
	raw := append(encode(t, validSpec()), " \n\t\r\n"...)
	if _, err := DecodeBytes(raw); err != nil {
		t.Fatalf("trailing whitespace refused: %v", err)
	}
}

func TestDecodeVersion(t *testing.T) {
	tests := []struct {
		name    string
		version any // nil means: remove the key
		remove  bool
		wantErr string
	}{
		{name: "missing", remove: true, wantErr: "version missing not supported"},
		{name: "null", version: nil, wantErr: "not supported"},
		{name: "zero", version: 0, wantErr: "version 0 not supported"},
		{name: "two", version: 2, wantErr: "version 2 not supported"},
		{name: "negative", version: -1, wantErr: "not supported"},
		{name: "string", version: "1", wantErr: "decode launch spec"},
		{name: "float", version: 1.5, wantErr: "decode launch spec"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := asMap(t)
			if tc.remove {
				delete(m, "version")
			} else {
				m["version"] = tc.version
			}
			s, err := DecodeBytes(marshalMap(t, m))
			if err == nil {
				t.Fatalf("spec with version %v accepted: %+v", tc.version, s)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %q does not mention %q", err, tc.wantErr)
			}
		})
	}
}

func TestDecodeRefusesMalformedInput(t *testing.T) {
	valid := string(encode(t, validSpec()))
	tests := []struct {
		name string
		raw  string
	}{
		{"empty", ""},
		{"whitespace only", "   \n"},
		{"null", "null"},
		{"array", "[" + valid + "]"},
		{"string", `"version"`},
		{"truncated", valid[:len(valid)-1]},
		{"second object", valid + valid},
		{"second object after newline", valid + "\n" + valid},
		{"trailing garbage", valid + "x"},
		{"trailing number", valid + " 1"},
		{"trailing brace", valid + "}"},
		{"trailing bracket", valid + "]"},
		{"trailing null", valid + "null"},
		{"trailing NUL byte", valid + "\x00"},
		{"comment", "// c\n" + valid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := DecodeBytes([]byte(tc.raw)); err == nil {
				t.Fatalf("DecodeBytes(%q) accepted: %+v", tc.raw, s)
			}
			if s, err := Decode(strings.NewReader(tc.raw)); err == nil {
				t.Fatalf("Decode(%q) accepted: %+v", tc.raw, s)
			}
		})
	}
}

func TestDecodeUnknownFields(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(m map[string]any)
	}{
		{"top level", func(m map[string]any) { m["bwrap"] = "/tmp/evil" }},
		{"top level ro_binds", func(m map[string]any) { m["ro_binds"] = []string{"/"} }},
		{"top level empty object", func(m map[string]any) { m["extra"] = map[string]any{} }},
		{"inside process", func(m map[string]any) { m["process"].(map[string]any)["argv"] = []string{"/bin/sh"} }},
		{"inside process.user", func(m map[string]any) {
			m["process"].(map[string]any)["user"] = map[string]any{"uid": 0, "gid": 0, "home": "/root"}
		}},
		{"inside an rlimit", func(m map[string]any) {
			p := m["process"].(map[string]any)
			p["rlimits"] = []any{map[string]any{"type": "RLIMIT_NOFILE", "soft": 1, "hard": 2, "extra": true}}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := asMap(t)
			tc.mutate(m)
			s, err := DecodeBytes(marshalMap(t, m))
			if err == nil {
				t.Fatalf("spec with an unknown field accepted: %+v", s)
			}
			if !strings.Contains(err.Error(), "unknown field") {
				t.Fatalf("error %q does not name the unknown field", err)
			}
		})
	}
}

func TestDecodeSizeLimit(t *testing.T) {
	// A spec exactly MaxSize bytes long (padded with trailing whitespace)
	// is read; one byte more is refused before decoding.
	base := encode(t, validSpec())
	atLimit := append(append([]byte{}, base...), bytes.Repeat([]byte(" "), MaxSize-len(base))...)
	if len(atLimit) != MaxSize {
		t.Fatalf("test bug: len %d", len(atLimit))
	}
	if _, err := Decode(bytes.NewReader(atLimit)); err != nil {
		t.Fatalf("spec of exactly MaxSize bytes refused: %v", err)
	}
	over := append(atLimit, ' ')
	_, err := Decode(bytes.NewReader(over))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("spec of MaxSize+1 bytes: err = %v, want a size error", err)
	}

	// Code is what makes a spec big: a program over MaxSize is refused.
	big := validSpec()
	big.Code = bytes.Repeat([]byte("x"), MaxSize)
	_, err = Decode(bytes.NewReader(encode(t, big)))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("spec with %d bytes of code: err = %v, want a size error", MaxSize, err)
	}
}

// endless is a reader that never ends; Decode must stop at MaxSize+1.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	e.n += int64(len(p))
	return len(p), nil
}

func TestDecodeCodeEncoding(t *testing.T) {
	// Code travels as base64 and comes back byte for byte, control
	// characters and invalid UTF-8 included.
	want := validSpec()
	want.Code = make([]byte, 0, 256)
	for b := 1; b < 256; b++ {
		want.Code = append(want.Code, byte(b))
	}
	got, err := DecodeBytes(encode(t, want))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Code, want.Code) {
		t.Fatalf("code changed in transit: %q", got.Code)
	}
	// Code that is not base64 is refused.
	m := asMap(t)
	m["code"] = "print(1)"
	if s, err := DecodeBytes(marshalMap(t, m)); err == nil {
		t.Fatalf("non-base64 code accepted: %q", s.Code)
	}
	// A NUL hidden in base64 is still found.
	m["code"] = "cHJpbnQAMQ==" // "print\x001"
	if _, err := DecodeBytes(marshalMap(t, m)); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Fatalf("base64 code with a NUL: err = %v", err)
	}
}

func TestDecodeLargestProgram(t *testing.T) {
	// MaxSize bounds the encoded spec; base64 makes code 4/3 bigger, so a
	// program of 3/4 MaxSize less some room for the other fields fits.
	s := validSpec()
	s.Code = bytes.Repeat([]byte("# x\n"), (MaxSize/4*3-4096)/4)
	raw := encode(t, s)
	if len(raw) > MaxSize {
		t.Fatalf("test bug: encoded spec is %d bytes", len(raw))
	}
	got, err := Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("spec with %d bytes of code refused: %v", len(s.Code), err)
	}
	if !bytes.Equal(got.Code, s.Code) {
		t.Fatal("large code changed in transit")
	}
}

func TestDecodeStopsReadingAtLimit(t *testing.T) {
	r := &endless{}
	if _, err := Decode(r); err == nil {
		t.Fatal("endless input accepted")
	}
	if r.n > MaxSize+1+64<<10 {
		t.Fatalf("Decode read %d bytes from an endless reader; want about MaxSize", r.n)
	}
}

func TestDecodeReadError(t *testing.T) {
	boom := errors.New("boom")
	_, err := Decode(io.MultiReader(strings.NewReader(`{"version":1`), iotest.ErrReader(boom)))
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want it to wrap the read error", err)
	}
}

func TestValidate(t *testing.T) {
	i := func(v int) *int { return &v }
	tests := []struct {
		name    string
		mutate  func(s *LaunchSpec)
		wantErr string // empty: valid
	}{
		// exec_id
		{"exec_id empty", func(s *LaunchSpec) { s.ExecID = "" }, "exec_id"},
		{"exec_id 64 chars", func(s *LaunchSpec) { s.ExecID = strings.Repeat("a", 64) }, ""},
		{"exec_id 65 chars", func(s *LaunchSpec) { s.ExecID = strings.Repeat("a", 65) }, "exec_id"},
		{"exec_id with slash", func(s *LaunchSpec) { s.ExecID = "a/b" }, "exec_id"},
		{"exec_id dotdot", func(s *LaunchSpec) { s.ExecID = ".." }, "exec_id"},
		{"exec_id with space", func(s *LaunchSpec) { s.ExecID = "a b" }, "exec_id"},
		{"exec_id with newline", func(s *LaunchSpec) { s.ExecID = "a\n" }, "exec_id"},
		{"exec_id with NUL", func(s *LaunchSpec) { s.ExecID = "a\x00" }, "exec_id"},
		{"exec_id non-ASCII", func(s *LaunchSpec) { s.ExecID = "é" }, "exec_id"},
		{"exec_id option-like", func(s *LaunchSpec) { s.ExecID = "--bind" }, ""},
		// workspace
		{"workspace empty", func(s *LaunchSpec) { s.Workspace = "" }, "workspace"},
		{"workspace dot", func(s *LaunchSpec) { s.Workspace = "." }, "workspace"},
		{"workspace dotdot", func(s *LaunchSpec) { s.Workspace = ".." }, "workspace"},
		{"workspace a/b", func(s *LaunchSpec) { s.Workspace = "a/b" }, "workspace"},
		{"workspace absolute", func(s *LaunchSpec) { s.Workspace = "/etc" }, "workspace"},
		{"workspace trailing slash", func(s *LaunchSpec) { s.Workspace = "a/" }, "workspace"},
		{"workspace ../x", func(s *LaunchSpec) { s.Workspace = "../x" }, "workspace"},
		{"workspace hidden", func(s *LaunchSpec) { s.Workspace = ".ssh" }, "workspace"},
		{"workspace NUL", func(s *LaunchSpec) { s.Workspace = "a\x00b" }, "workspace"},
		{"workspace 65 chars", func(s *LaunchSpec) { s.Workspace = strings.Repeat("w", 65) }, "workspace"},
		{"workspace 64 chars", func(s *LaunchSpec) { s.Workspace = strings.Repeat("w", 64) }, ""},
		// runtime
		{"runtime empty", func(s *LaunchSpec) { s.Runtime = "" }, "runtime is required"},
		{"runtime probe", func(s *LaunchSpec) { s.Runtime = "probe" }, ""},
		// network
		{"network empty", func(s *LaunchSpec) { s.Network = "" }, "network mode"},
		{"network host", func(s *LaunchSpec) { s.Network = "host" }, "network mode"},
		{"network None", func(s *LaunchSpec) { s.Network = "None" }, "network mode"},
		{"network bridge", func(s *LaunchSpec) { s.Network = "bridge" }, "network mode"},
		// tmp
		{"tmp negative", func(s *LaunchSpec) { s.TmpSizeBytes = -1 }, "negative"},
		{"tmp zero", func(s *LaunchSpec) { s.TmpSizeBytes = 0 }, ""},
		// code
		{"code NUL", func(s *LaunchSpec) { s.Code = []byte("print(1)\x00rm -rf /") }, "NUL"},
		{"code only NUL", func(s *LaunchSpec) { s.Code = []byte{0} }, "NUL"},
		{"code empty", func(s *LaunchSpec) { s.Code = []byte{} }, ""},
		{"code nil", func(s *LaunchSpec) { s.Code = nil }, ""},
		{"code invalid UTF-8", func(s *LaunchSpec) { s.Code = []byte("\xff\xfe") }, ""},
		// process: everything but env and rlimits is the helper's
		{"process args", func(s *LaunchSpec) { s.Process.Args = []string{"/bin/sh"} }, "only env and rlimits"},
		{"process commandLine", func(s *LaunchSpec) { s.Process.CommandLine = "sh" }, "only env and rlimits"},
		{"process cwd", func(s *LaunchSpec) { s.Process.Cwd = "/" }, "only env and rlimits"},
		{"process user.uid", func(s *LaunchSpec) { s.Process.User.UID = 1 }, "only env and rlimits"},
		{"process user.gid", func(s *LaunchSpec) { s.Process.User.GID = 1 }, "only env and rlimits"},
		{"process user.additionalGids", func(s *LaunchSpec) { s.Process.User.AdditionalGids = []uint32{0} }, "only env and rlimits"},
		{"process user.username", func(s *LaunchSpec) { s.Process.User.Username = "root" }, "only env and rlimits"},
		{"process capabilities", func(s *LaunchSpec) {
			s.Process.Capabilities = &specs.LinuxCapabilities{Bounding: []string{"CAP_SYS_ADMIN"}}
		}, "only env and rlimits"},
		{"process capabilities empty", func(s *LaunchSpec) { s.Process.Capabilities = &specs.LinuxCapabilities{} }, "only env and rlimits"},
		{"process noNewPrivileges", func(s *LaunchSpec) { s.Process.NoNewPrivileges = true }, "only env and rlimits"},
		{"process terminal", func(s *LaunchSpec) { s.Process.Terminal = true }, "only env and rlimits"},
		{"process consoleSize", func(s *LaunchSpec) { s.Process.ConsoleSize = &specs.Box{Height: 1, Width: 1} }, "only env and rlimits"},
		{"process apparmorProfile", func(s *LaunchSpec) { s.Process.ApparmorProfile = "unconfined" }, "only env and rlimits"},
		{"process selinuxLabel", func(s *LaunchSpec) { s.Process.SelinuxLabel = "x" }, "only env and rlimits"},
		{"process oomScoreAdj", func(s *LaunchSpec) { s.Process.OOMScoreAdj = i(-1000) }, "only env and rlimits"},
		{"process oomScoreAdj zero", func(s *LaunchSpec) { s.Process.OOMScoreAdj = i(0) }, "only env and rlimits"},
		{"process scheduler", func(s *LaunchSpec) { s.Process.Scheduler = &specs.Scheduler{Policy: "SCHED_FIFO"} }, "only env and rlimits"},
		{"process ioPriority", func(s *LaunchSpec) { s.Process.IOPriority = &specs.LinuxIOPriority{Class: "IOPRIO_CLASS_RT"} }, "only env and rlimits"},
		{"process execCPUAffinity", func(s *LaunchSpec) { s.Process.ExecCPUAffinity = &specs.CPUAffinity{Initial: "0"} }, "only env and rlimits"},
		// env
		{"env nil", func(s *LaunchSpec) { s.Process.Env = nil }, ""},
		{"env without =", func(s *LaunchSpec) { s.Process.Env = []string{"FOO"} }, "process.env entry"},
		{"env empty entry", func(s *LaunchSpec) { s.Process.Env = []string{""} }, "process.env entry"},
		{"env empty name", func(s *LaunchSpec) { s.Process.Env = []string{"=x"} }, "process.env entry"},
		{"env name starts with digit", func(s *LaunchSpec) { s.Process.Env = []string{"1A=x"} }, "process.env entry"},
		{"env name with dash", func(s *LaunchSpec) { s.Process.Env = []string{"A-B=x"} }, "process.env entry"},
		{"env name with dot", func(s *LaunchSpec) { s.Process.Env = []string{"A.B=x"} }, "process.env entry"},
		{"env name with space", func(s *LaunchSpec) { s.Process.Env = []string{"A B=x"} }, "process.env entry"},
		{"env name with NUL", func(s *LaunchSpec) { s.Process.Env = []string{"A\x00B=x"} }, "process.env entry"},
		{"env name non-ASCII", func(s *LaunchSpec) { s.Process.Env = []string{"É=x"} }, "process.env entry"},
		{"env value with NUL", func(s *LaunchSpec) { s.Process.Env = []string{"A=x\x00B=y"} }, "NUL"},
		{"env duplicate", func(s *LaunchSpec) { s.Process.Env = []string{"A=1", "B=2", "A=3"} }, "given twice"},
		{"env duplicate same value", func(s *LaunchSpec) { s.Process.Env = []string{"A=1", "A=1"} }, "given twice"},
		{"env names are case sensitive", func(s *LaunchSpec) { s.Process.Env = []string{"a=1", "A=1"} }, ""},
		{"env underscore name", func(s *LaunchSpec) { s.Process.Env = []string{"_=1", "_A1=2"} }, ""},
		{"env long entry is truncated in the error", func(s *LaunchSpec) {
			s.Process.Env = []string{strings.Repeat("x", 1000)}
		}, "…"},
		// rlimits
		{"rlimit not allowed", func(s *LaunchSpec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NPROC", Soft: 1, Hard: 1}}
		}, "RLIMIT_NPROC may not be set"},
		{"rlimit unknown", func(s *LaunchSpec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: "NOFILE", Soft: 1, Hard: 1}}
		}, "may not be set"},
		{"rlimit empty type", func(s *LaunchSpec) { s.Process.Rlimits = []specs.POSIXRlimit{{}} }, "may not be set"},
		{"rlimit lower case", func(s *LaunchSpec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: "rlimit_nofile", Soft: 1, Hard: 1}}
		}, "may not be set"},
		{"rlimit soft above hard", func(s *LaunchSpec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 2, Hard: 1}}
		}, "soft 2 above hard 1"},
		{"rlimit soft equals hard", func(s *LaunchSpec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 7, Hard: 7}}
		}, ""},
		{"rlimit second entry bad", func(s *LaunchSpec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_AS", Soft: 1, Hard: 2}, {Type: "RLIMIT_RTPRIO", Soft: 1, Hard: 1}}
		}, "RLIMIT_RTPRIO"},
	}
	for rl := range AllowedRlimits {
		tests = append(tests, struct {
			name    string
			mutate  func(s *LaunchSpec)
			wantErr string
		}{"rlimit allowed " + rl, func(s *LaunchSpec) {
			s.Process.Rlimits = []specs.POSIXRlimit{{Type: rl, Soft: 1, Hard: 1}}
		}, ""})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := validSpec()
			tc.mutate(&s)
			err := s.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
			} else {
				if err == nil {
					t.Fatalf("Validate accepted %+v", s)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate error %q does not contain %q", err, tc.wantErr)
				}
			}
			// Whatever Validate says, DecodeBytes says the same through the wire.
			raw, merr := json.Marshal(s)
			if merr != nil {
				t.Fatal(merr)
			}
			_, derr := DecodeBytes(raw)
			if (derr == nil) != (err == nil) {
				t.Fatalf("DecodeBytes err = %v but Validate err = %v", derr, err)
			}
		})
	}
}

func TestValidateErrorDoesNotCarryEnvValue(t *testing.T) {
	// The NUL check names the variable, not its value (values may be secrets).
	s := validSpec()
	s.Process.Env = []string{"TOKEN=secret-value\x00"}
	err := s.Validate()
	if err == nil {
		t.Fatal("NUL in env value accepted")
	}
	if strings.Contains(err.Error(), "secret-value") {
		t.Fatalf("error %q carries the env value", err)
	}
}

func TestAllowedRlimits(t *testing.T) {
	want := []string{"RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_FSIZE", "RLIMIT_MEMLOCK", "RLIMIT_NOFILE", "RLIMIT_STACK"}
	if len(AllowedRlimits) != len(want) {
		t.Fatalf("AllowedRlimits = %v, want exactly %v", AllowedRlimits, want)
	}
	for _, rl := range want {
		if !AllowedRlimits[rl] {
			t.Errorf("%s not allowed", rl)
		}
	}
}

func TestFDsAndExitStatuses(t *testing.T) {
	if FDSpec != 3 || FDReport != 4 || FDStatus != 5 || FDRelease != 6 {
		t.Fatalf("fd numbers changed: spec %d report %d status %d release %d (the prelude keeps 0..6)", FDSpec, FDReport, FDStatus, FDRelease)
	}
	statuses := []int{ExitUsage, ExitConfig, ExitSpec, ExitEnter, ExitNetwork, ExitSeccomp, ExitDrop, ExitExec}
	seen := map[int]bool{}
	for _, s := range statuses {
		if s < 100 || s > 125 {
			t.Errorf("exit status %d collides with bwrap's, the payload's or the shell's range", s)
		}
		if seen[s] {
			t.Errorf("exit status %d used twice", s)
		}
		seen[s] = true
	}
}

func TestUnavailable(t *testing.T) {
	tests := []struct {
		status int
		want   bool
	}{
		{ExitUsage, false},  // a bug in how the helper was started
		{ExitConfig, true},  // host: helper config
		{ExitSpec, false},   // a refused spec is the caller's problem
		{ExitEnter, true},   // host: user namespaces
		{ExitNetwork, true}, // host: network namespace
		{ExitSeccomp, true}, // host: profile
		{ExitDrop, true},    // host: capabilities
		{ExitExec, true},    // host: bwrap missing
		{0, false},
		{1, false},
		{99, false},
		{ExitEnvironment, true}, // host: an environment tree changed after registration
		{109, false},
		{126, false},
		{127, false},
		{128 + 9, false},
		{255, false},
		{-1, false},
	}
	for _, tc := range tests {
		if got := Unavailable(tc.status); got != tc.want {
			t.Errorf("Unavailable(%d) = %v, want %v", tc.status, got, tc.want)
		}
	}
}

func TestReportJSON(t *testing.T) {
	b, err := json.Marshal(Report{Step: "enter", OK: true})
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"step":"enter","ok":true}` {
		t.Fatalf("minimal report encodes as %s", b)
	}
	r, f, err := ParseReport([]byte(`{"step":"drop","ok":false,"error":"e","fix":"f","facts":{"no_new_privs":1,"t_us":7}}`))
	if err != nil {
		t.Fatal(err)
	}
	d, ok := f.(*facts.Drop)
	if r.Step != "drop" || r.OK || r.Error != "e" || r.Fix != "f" || !ok || d.NoNewPrivs != 1 || d.TUS != 7 {
		t.Fatalf("report decoded as %+v, facts %#v", r, f)
	}
}

func TestParseReport(t *testing.T) {
	okExec := `{"argv":["bwrap","--"],"bwrap_env":["PATH=/usr/bin"],"mounts_sha256":"m","profile_sha256":"p","helper_version":"v","code_sha256":"c","t_us":5}`
	for _, tc := range []struct {
		name, line, err string
	}{
		{"exec ok", `{"step":"exec","ok":true,"facts":` + okExec + `}`, ""},
		{"failed step with no facts", `{"step":"enter","ok":false,"error":"bad spec","facts":{"t_us":3}}`, ""},
		{"prelude failure at network carries enter facts", `{"step":"network","ok":false,"error":"unshare","facts":{"exec_id":"x","euid":1,"t_us":3}}`, ""},
		{"unknown fact", `{"step":"seccomp","ok":false,"facts":{"profile":"p","colour":"red"}}`, `unknown fact "colour"`},
		{"missing required fact", `{"step":"exec","ok":true,"facts":{"argv":["bwrap"],"t_us":5}}`, "missing bwrap_env, mounts_sha256"},
		{"unknown envelope field", `{"step":"exec","ok":true,"facts":` + okExec + `,"extra":1}`, `unknown field "extra"`},
		{"not a helper step", `{"step":"reap","ok":false}`, "not a helper step"},
		{"unknown step", `{"step":"mount","ok":true}`, "no typed facts"},
		{"trailing data", `{"step":"enter","ok":false}{}`, "data after"},
		{"too large", `{"step":"exec","ok":false,"error":"` + strings.Repeat("a", facts.MaxReport) + `"}`, "above the"},
		{"wrong type", `{"step":"drop","ok":false,"facts":{"threads_checked":"all"}}`, "threads_checked"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, f, err := ParseReport([]byte(tc.line))
			if tc.err == "" {
				if err != nil || f == nil {
					t.Fatalf("ParseReport: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("ParseReport error %v, want one containing %q", err, tc.err)
			}
		})
	}
	_, f, _ := ParseReport([]byte(`{"step":"exec","ok":true,"facts":` + okExec + `}`))
	if a := f.(*facts.Exec).Attestation(); a != (facts.Attestation{ProfileSHA256: "p", MountsSHA256: "m", HelperVersion: "v"}) {
		t.Fatalf("attestation %+v", a)
	}
	_, f, _ = ParseReport([]byte(`{"step":"network","ok":false,"facts":{"exec_id":"x","euid":1}}`))
	if e := facts.PreludeFailure(f); e == nil || e.ExecID != "x" {
		t.Fatalf("prelude failure facts %#v", f)
	}
}

// Regression: process.user.umask was the one Process field not refused.
func TestValidateRefusesUmask(t *testing.T) {
	s := validSpec()
	u := uint32(0)
	s.Process.User.Umask = &u
	if err := s.Validate(); err == nil {
		t.Fatal("process.user.umask accepted: only env and rlimits may be set")
	}
}
