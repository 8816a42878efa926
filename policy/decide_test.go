package policy

import (
	"errors"
	"strings"
	"testing"
)

func ptr[T any](v T) *T { return &v }

func TestClampTimeout(t *testing.T) {
	cfg := Defaults()
	tests := []struct {
		name      string
		req       *int64
		session   bool
		want      int64
		wantErrIn string
	}{
		{"default one-shot", nil, false, 30000, ""},
		{"default session", nil, true, 30000, ""},
		{"one-shot minimum", ptr[int64](1), false, 1, ""},
		{"one-shot maximum", ptr[int64](60000), false, 60000, ""},
		{"one-shot zero", ptr[int64](0), false, 0, "out of range: must be 1..60000"},
		{"one-shot negative", ptr[int64](-5), false, 0, "out of range"},
		{"one-shot above max", ptr[int64](60001), false, 0, "above the operator cap of 60000 for one-shot execs; use a session for up to 600000"},
		{"session above one-shot max", ptr[int64](60001), true, 60001, ""},
		{"session at cap", ptr[int64](600000), true, 600000, ""},
		{"session above cap", ptr[int64](600001), true, 0, "above the operator cap of 600000 for session execs"},
		{"session zero", ptr[int64](0), true, 0, "must be 1..600000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ClampTimeout(tc.req, tc.session, cfg)
			if tc.wantErrIn != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrIn) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErrIn)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err %v is not ErrInvalid", err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d, nil", got, err, tc.want)
			}
		})
	}
}

func TestClampTimeoutOperatorSettings(t *testing.T) {
	cfg := Defaults()
	cfg.ExecTimeoutMS = 5000
	cfg.ExecTimeoutMaxMS = 10000
	cfg.ExecTimeoutCapMS = 10000
	if got, _ := ClampTimeout(nil, false, cfg); got != 5000 {
		t.Fatalf("default = %d, want 5000", got)
	}
	_, err := ClampTimeout(ptr[int64](10001), false, cfg)
	if err == nil || strings.Contains(err.Error(), "use a session") {
		t.Fatalf("err = %v; want a refusal without the session hint (sessions get no more)", err)
	}
}

func TestValidateEnv(t *testing.T) {
	many := map[string]string{}
	for i := 0; i < MaxEnvNames+1; i++ {
		many["V"+strings.Repeat("X", i)] = "1"
	}
	exactly := map[string]string{}
	for i := 0; i < MaxEnvNames; i++ {
		exactly["V"+strings.Repeat("X", i)] = "1"
	}
	tests := []struct {
		name      string
		env       map[string]string
		wantErrIn string
	}{
		{"nil", nil, ""},
		{"plain", map[string]string{"FOO": "bar", "_x1": "", "a": "b"}, ""},
		{"value at limit", map[string]string{"A": strings.Repeat("v", MaxEnvValueBytes)}, ""},
		{"64 names", exactly, ""},
		{"65 names", many, "65 names; at most 64"},
		{"leading digit", map[string]string{"1A": "x"}, `"1A" is not allowed: names must match`},
		{"dash", map[string]string{"A-B": "x"}, "names must match"},
		{"equals", map[string]string{"A=B": "x"}, "names must match"},
		{"empty name", map[string]string{"": "x"}, "names must match"},
		{"space", map[string]string{"A B": "x"}, "names must match"},
		{"unicode", map[string]string{"É": "x"}, "names must match"},
		{"NUL in name", map[string]string{"A\x00": "x"}, "names must match"},
		{"LD_PRELOAD", map[string]string{"LD_PRELOAD": "/x.so"}, "starting with LD_ are refused"},
		{"LD_LIBRARY_PATH", map[string]string{"LD_LIBRARY_PATH": "/x"}, "starting with LD_"},
		{"lower ld_ is a different name", map[string]string{"ld_preload": "x"}, ""},
		{"SANDBOXD_", map[string]string{"SANDBOXD_SOCKET": "/x"}, "starting with SANDBOXD_ are refused"},
		{"value too long", map[string]string{"A": strings.Repeat("v", MaxEnvValueBytes+1)}, "at most 32768"},
		{"NUL in value", map[string]string{"A": "x\x00y"}, "NUL"},
		{"name too long", map[string]string{strings.Repeat("N", MaxEnvNameBytes+1): "x"}, "at most 256"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateEnv(tc.env)
			if tc.wantErrIn == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErrIn) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.wantErrIn)
			}
		})
	}
}

func TestValidateEnvDeterministic(t *testing.T) {
	env := map[string]string{"B-1": "", "A-1": "", "C-1": ""}
	for i := 0; i < 20; i++ {
		err := ValidateEnv(env)
		if err == nil || !strings.Contains(err.Error(), `"A-1"`) {
			t.Fatalf("err = %v; want the first name in sorted order", err)
		}
	}
}

func TestRuntime(t *testing.T) {
	tests := []struct {
		lang, want, wantErrIn string
	}{
		{"python", "python", ""},
		{"javascript", "javascript", ""},
		{"", "", "language is required"},
		{"Python", "", `"Python" is not supported`},
		{"ruby", "", "want one of python, javascript"},
		{"node", "", "not supported"},
	}
	for _, tc := range tests {
		got, err := Runtime(tc.lang)
		if tc.wantErrIn != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrIn) || !errors.Is(err, ErrInvalid) {
				t.Errorf("Runtime(%q) err = %v, want %q", tc.lang, err, tc.wantErrIn)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Runtime(%q) = %q, %v", tc.lang, got, err)
		}
	}
	rt := Runtimes()
	rt[0] = "mutated"
	if Runtimes()[0] != "python" {
		t.Fatal("Runtimes returned shared state")
	}
}

func TestNetwork(t *testing.T) {
	tests := []struct{ in, want, wantErrIn string }{
		{"", "none", ""},
		{"none", "none", ""},
		{"host", "", `"host" is not supported`},
		{"None", "", "not supported"},
		{"bridge", "", `want "none" or "egress"`},
		{"egress", "egress", ""},
	}
	for _, tc := range tests {
		got, err := Network(tc.in)
		if tc.wantErrIn != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErrIn) {
				t.Errorf("Network(%q) err = %v", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Network(%q) = %q, %v", tc.in, got, err)
		}
	}
}

func TestValidateWorkspacePath(t *testing.T) {
	tests := []struct {
		path      string
		wantErrIn string
	}{
		{"a", ""},
		{"data/in.csv", ""},
		{"outputs/deep/er/x.png", ""},
		{".hidden", ""},
		{"a..b", ""},
		{"..a", ""},
		{"a/...", ""},
		{"with space.txt", ""},
		{"ünïcode/ファイル", ""},
		{strings.Repeat("a/", 2047) + "b", ""}, // 4096 bytes
		{"", "empty"},
		{strings.Repeat("a/", 2048) + "b", "at most 4096"},
		{strings.Repeat("n", 256), "component of 256 bytes"},
		{"..", `".." component`},
		{"../x", `".." component`},
		{"a/../../b", `".." component`},
		{"a/..", `".." component`},
		{"a/../b", `".." component`},
		{"/etc/passwd", "is absolute"},
		{"/", "is absolute"},
		{"//x", "is absolute"},
		{"a\x00b", "NUL"},
		{"a\nb", "control character"},
		{"a\x7fb", "control character"},
		{`..\x`, "backslash"},
		{`a\b`, "backslash"},
		{`C:\x`, "backslash"},
		{".", "workspace itself"},
		{"./a", "not in clean form"},
		{"a//b", "not in clean form"},
		{"a/", "not in clean form"},
		{"a/./b", "not in clean form"},
		{"a/.", "not in clean form"},
	}
	for _, tc := range tests {
		err := ValidateWorkspacePath(tc.path)
		if tc.wantErrIn == "" {
			if err != nil {
				t.Errorf("ValidateWorkspacePath(%.60q) = %v, want nil", tc.path, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErrIn) || !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateWorkspacePath(%.60q) = %v, want ErrInvalid containing %q", tc.path, err, tc.wantErrIn)
		}
	}
}

func TestValidateArtifactPattern(t *testing.T) {
	tests := []struct {
		pattern   string
		wantErrIn string
	}{
		{"outputs/*.png", ""},
		{"report.txt", ""},
		{"*", ""},
		{"out/[a-z]?.csv", ""},
		{"out/[!x]*", ""},
		{"out/[", "not a valid glob"},
		{"out/[a-", "not a valid glob"},
		{"../*", `".." component`},
		{"/tmp/*", "absolute"},
		{`out/\*`, "backslash"},
		{"", "empty"},
	}
	for _, tc := range tests {
		err := ValidateArtifactPattern(tc.pattern)
		if tc.wantErrIn == "" {
			if err != nil {
				t.Errorf("ValidateArtifactPattern(%q) = %v", tc.pattern, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErrIn) {
			t.Errorf("ValidateArtifactPattern(%q) = %v, want %q", tc.pattern, err, tc.wantErrIn)
		}
	}
}

func TestLimitsFromConfig(t *testing.T) {
	l := Defaults().Limits(1234)
	want := Limits{
		TimeoutMS: 1234, OutputLimitBytes: 262144, TmpSizeBytes: 256 << 20, MemoryBytes: 2 << 30,
		Pids: 256, CPUs: 1, NoFile: 1024, FileSizeBytes: 1024 << 20,
	}
	if l != want {
		t.Fatalf("Limits = %+v, want %+v", l, want)
	}
}
