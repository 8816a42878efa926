package policy

import (
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/errdefs"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// decideConfig is the operator configuration of the table: the defaults,
// with small code and quota limits so that every limit is one row.
func decideConfig() Config {
	cfg := Defaults()
	cfg.MaxCodeBytes = 16
	cfg.WorkspaceQuotaBytes = 8
	return cfg
}

// goodRequest is a request every rule accepts; each row changes one thing.
func goodRequest() Request {
	return Request{Exec: api.ExecRequest{
		Language:  "python",
		Code:      "print(1)",
		Stdin:     "in",
		Files:     []api.ExecFile{{Path: "data/in.csv", ContentBase64: b64("a,b\n")}},
		Env:       map[string]string{"MODE": "x", "API_TOKEN": "s3cret"},
		TimeoutMS: ptr[int64](1500),
		Artifacts: []string{"outputs/*.png"},
		Network:   "none",
	}}
}

// TestDecideRefusals: every refusal of the decide step, one row each, with
// its errdefs class (which makes the API code) and its message.
func TestDecideRefusals(t *testing.T) {
	many := func(n int, f func(i int) string) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = f(i)
		}
		return out
	}
	tests := []struct {
		name   string
		mutate func(r *Request, cfg *Config)
		class  error
		msg    string
	}{
		{"no language", func(r *Request, _ *Config) { r.Exec.Language = "" }, errdefs.ErrInvalid, "language is required: one of python, javascript"},
		{"unknown language", func(r *Request, _ *Config) { r.Exec.Language = "ruby" }, errdefs.ErrInvalid, `language "ruby" is not supported`},
		{"language is case-sensitive", func(r *Request, _ *Config) { r.Exec.Language = "Python" }, errdefs.ErrInvalid, `language "Python" is not supported`},
		{"empty code", func(r *Request, _ *Config) { r.Exec.Code = "" }, errdefs.ErrInvalid, "code is required and must not be empty"},
		{"code too large", func(r *Request, _ *Config) { r.Exec.Code = strings.Repeat("a", 17) }, errdefs.ErrTooLarge, "code is 17 bytes; the limit is 16"},
		{"NUL in code", func(r *Request, _ *Config) { r.Exec.Code = "print(1)\x00" }, errdefs.ErrInvalid, "code contains a NUL byte"},
		{"timeout zero", func(r *Request, _ *Config) { r.Exec.TimeoutMS = ptr[int64](0) }, errdefs.ErrInvalid, "timeout_ms 0 is out of range: must be 1..60000 for one-shot execs"},
		{"timeout negative", func(r *Request, _ *Config) { r.Exec.TimeoutMS = ptr[int64](-1) }, errdefs.ErrInvalid, "timeout_ms -1 is out of range"},
		{"timeout above the one-shot max", func(r *Request, _ *Config) { r.Exec.TimeoutMS = ptr[int64](60001) }, errdefs.ErrInvalid, "timeout_ms 60001 is above the operator cap of 60000 for one-shot execs; use a session for up to 600000"},
		{"timeout above the session cap", func(r *Request, _ *Config) { r.Session, r.Exec.TimeoutMS = true, ptr[int64](600001) }, errdefs.ErrInvalid, "timeout_ms 600001 is above the operator cap of 600000 for session execs"},
		{"too many files", func(r *Request, _ *Config) { r.Exec.Files = make([]api.ExecFile, MaxFiles+1) }, errdefs.ErrInvalid, "files has 1001 entries; at most 1000 are allowed"},
		{"file path empty", func(r *Request, _ *Config) { r.Exec.Files[0].Path = "" }, errdefs.ErrInvalid, "files[0].path: path is empty"},
		{"file path absolute", func(r *Request, _ *Config) { r.Exec.Files[0].Path = "/etc/passwd" }, errdefs.ErrInvalid, `files[0].path: path "/etc/passwd" is absolute`},
		{"file path climbs out", func(r *Request, _ *Config) { r.Exec.Files[0].Path = "../x" }, errdefs.ErrInvalid, `has a ".." component`},
		{"file path unclean", func(r *Request, _ *Config) { r.Exec.Files[0].Path = "a//b" }, errdefs.ErrInvalid, `path "a//b" is not in clean form`},
		{"file path backslash", func(r *Request, _ *Config) { r.Exec.Files[0].Path = `a\b` }, errdefs.ErrInvalid, "contains a backslash"},
		{"file path control character", func(r *Request, _ *Config) { r.Exec.Files[0].Path = "a\nb" }, errdefs.ErrInvalid, "contains a control character"},
		{"file path too long", func(r *Request, _ *Config) { r.Exec.Files[0].Path = strings.Repeat("a/", 2049) }, errdefs.ErrInvalid, "at most 4096 are allowed"},
		{"file path component too long", func(r *Request, _ *Config) { r.Exec.Files[0].Path = strings.Repeat("a", 256) }, errdefs.ErrInvalid, "has a component of 256 bytes"},
		{"file path twice", func(r *Request, _ *Config) {
			r.Exec.Files = append(r.Exec.Files, api.ExecFile{Path: "data/in.csv"})
		}, errdefs.ErrInvalid, `files[1].path "data/in.csv" is the same as files[0].path`},
		{"file is a directory of another", func(r *Request, _ *Config) {
			r.Exec.Files = append(r.Exec.Files, api.ExecFile{Path: "data"})
		}, errdefs.ErrInvalid, `files[1].path "data" is a directory of files[0].path "data/in.csv"`},
		{"file content not base64", func(r *Request, _ *Config) { r.Exec.Files[0].ContentBase64 = "!!" }, errdefs.ErrInvalid, "files[0].content_base64: not valid standard base64"},
		{"files above the quota", func(r *Request, _ *Config) {
			r.Exec.Files = append(r.Exec.Files, api.ExecFile{Path: "b", ContentBase64: b64("12345")})
		}, errdefs.ErrTooLarge, "files add up to more than the workspace quota of 8 bytes"},
		{"too many env names", func(r *Request, _ *Config) {
			for _, n := range many(MaxEnvNames, func(i int) string { return "V" + strings.Repeat("X", i) }) {
				r.Exec.Env[n] = ""
			}
		}, errdefs.ErrInvalid, "env has 66 names; at most 64 are allowed"},
		{"env name too long", func(r *Request, _ *Config) { r.Exec.Env[strings.Repeat("N", 257)] = "" }, errdefs.ErrInvalid, "is 257 bytes; at most 256 are allowed"},
		{"env name syntax", func(r *Request, _ *Config) { r.Exec.Env["1X"] = "" }, errdefs.ErrInvalid, `env name "1X" is not allowed: names must match`},
		{"env name LD_", func(r *Request, _ *Config) { r.Exec.Env["LD_PRELOAD"] = "/x.so" }, errdefs.ErrInvalid, `env name "LD_PRELOAD" is not allowed: names starting with LD_ are refused`},
		{"env name SANDBOXD_", func(r *Request, _ *Config) { r.Exec.Env["SANDBOXD_SOCKET"] = "/x" }, errdefs.ErrInvalid, "names starting with SANDBOXD_ are refused"},
		{"env value too long", func(r *Request, _ *Config) { r.Exec.Env["MODE"] = strings.Repeat("v", MaxEnvValueBytes+1) }, errdefs.ErrInvalid, "env MODE: value is 32769 bytes; at most 32768 are allowed"},
		{"env value NUL", func(r *Request, _ *Config) { r.Exec.Env["MODE"] = "a\x00b" }, errdefs.ErrInvalid, "env MODE: value contains a NUL byte"},
		{"too many artifact patterns", func(r *Request, _ *Config) {
			r.Exec.Artifacts = many(MaxArtifactPatterns+1, func(int) string { return "a" })
		}, errdefs.ErrInvalid, "artifacts has 65 patterns; at most 64 are allowed"},
		{"artifact pattern path", func(r *Request, _ *Config) { r.Exec.Artifacts = []string{"ok", "/abs/*"} }, errdefs.ErrInvalid, `artifacts[1]: path "/abs/*" is absolute`},
		{"artifact pattern glob", func(r *Request, _ *Config) { r.Exec.Artifacts = []string{"out/[a"} }, errdefs.ErrInvalid, `artifacts[0]: artifact pattern "out/[a" is not a valid glob`},
		{"unknown network", func(r *Request, _ *Config) { r.Exec.Network = "host" }, errdefs.ErrInvalid, `network "host" is not supported: want "none" or "egress"`},
		{"egress not enabled", func(r *Request, cfg *Config) { r.Exec.Network, cfg.EgressAllowUIDs = "egress", []int{1000} }, errdefs.ErrForbidden, `network "egress" is not enabled on this supervisor`},
		{"egress, caller not allowed", func(r *Request, cfg *Config) { r.Exec.Network, cfg.EgressAllow = "egress", "pypi.org" }, errdefs.ErrForbidden, `caller uid 1000 may not use network "egress"`},
		{"egress, another caller allowed", func(r *Request, cfg *Config) {
			r.Exec.Network, cfg.EgressAllow, cfg.EgressAllowUIDs = "egress", "pypi.org", []int{1001}
		}, errdefs.ErrForbidden, `caller uid 1000 may not use network "egress"`},
		{"operator's code limit", func(r *Request, cfg *Config) { cfg.MaxCodeBytes = 4 }, errdefs.ErrTooLarge, "code is 8 bytes; the limit is 4"},
		{"operator's timeout max", func(r *Request, cfg *Config) { cfg.ExecTimeoutMaxMS, cfg.ExecTimeoutCapMS = 1000, 1000 }, errdefs.ErrInvalid, "timeout_ms 1500 is above the operator cap of 1000 for one-shot execs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, cfg := goodRequest(), decideConfig()
			tc.mutate(&req, &cfg)
			d, err := Decide(req, Caller{UID: 1000}, cfg)
			if err == nil {
				t.Fatalf("accepted: %+v", d)
			}
			if errdefs.Class(err) != tc.class || !errors.Is(err, tc.class) {
				t.Fatalf("class %v, want %v (%v)", errdefs.Class(err), tc.class, err)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("message %q, want it to contain %q", err.Error(), tc.msg)
			}
			if d.Runtime != "" || d.Files != nil || d.Env != nil || d.Limits != (Limits{}) {
				t.Fatalf("a refusal carries a launch: %+v", d)
			}
			if d.Facts == nil || d.Facts.Session != req.Session {
				t.Fatalf("a refusal carries no facts: %v", d.Facts)
			}
		})
	}
}

// TestDecideClamps: every value Decide fills in or clamps, one row each.
func TestDecideClamps(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(r *Request, cfg *Config)
		check  func(t *testing.T, d Decision)
	}{
		{"timeout absent: the operator's default", func(r *Request, _ *Config) { r.Exec.TimeoutMS = nil }, func(t *testing.T, d Decision) {
			if d.Limits.TimeoutMS != 30000 {
				t.Fatalf("timeout %d", d.Limits.TimeoutMS)
			}
		}},
		{"timeout at the one-shot max", func(r *Request, _ *Config) { r.Exec.TimeoutMS = ptr[int64](60000) }, func(t *testing.T, d Decision) {
			if d.Limits.TimeoutMS != 60000 {
				t.Fatalf("timeout %d", d.Limits.TimeoutMS)
			}
		}},
		{"session timeout up to the session cap", func(r *Request, _ *Config) { r.Session, r.Exec.TimeoutMS = true, ptr[int64](600000) }, func(t *testing.T, d Decision) {
			if d.Limits.TimeoutMS != 600000 {
				t.Fatalf("timeout %d", d.Limits.TimeoutMS)
			}
		}},
		{"network absent: none", func(r *Request, _ *Config) { r.Exec.Network = "" }, func(t *testing.T, d Decision) {
			if d.Network != NetworkNone || d.Facts.Network != NetworkNone {
				t.Fatalf("network %q", d.Network)
			}
		}},
		{"env absent: empty, never nil", func(r *Request, _ *Config) { r.Exec.Env = nil }, func(t *testing.T, d Decision) {
			if d.Env == nil || len(d.Env) != 0 || len(d.Facts.EnvNames) != 0 {
				t.Fatalf("env %v, names %#v", d.Env, d.Facts.EnvNames)
			}
		}},
		{"files absent", func(r *Request, _ *Config) { r.Exec.Files = nil }, func(t *testing.T, d Decision) {
			if len(d.Files) != 0 || d.FileBytes != 0 || d.Facts.FileCount == nil || *d.Facts.FileCount != 0 {
				t.Fatalf("files %v", d.Files)
			}
		}},
		{"file without content: an empty file", func(r *Request, _ *Config) { r.Exec.Files[0].ContentBase64 = "" }, func(t *testing.T, d Decision) {
			if len(d.Files) != 1 || len(d.Files[0].Content) != 0 {
				t.Fatalf("files %v", d.Files)
			}
		}},
		{"files exactly at the quota", func(r *Request, _ *Config) { r.Exec.Files[0].ContentBase64 = b64("12345678") }, func(t *testing.T, d Decision) {
			if d.FileBytes != 8 {
				t.Fatalf("file bytes %d", d.FileBytes)
			}
		}},
		{"code exactly at the limit", func(r *Request, _ *Config) { r.Exec.Code = strings.Repeat("1", 16) }, func(t *testing.T, d Decision) {
			if len(d.Code) != 16 {
				t.Fatalf("code %q", d.Code)
			}
		}},
		{"limits: the operator's, file size = workspace quota", func(r *Request, cfg *Config) { cfg.MemoryBytes, cfg.Pids = 1<<30, 64 }, func(t *testing.T, d Decision) {
			if d.Limits.MemoryBytes != 1<<30 || d.Limits.Pids != 64 || d.Limits.FileSizeBytes != 8 || d.Limits.TimeoutMS != 1500 {
				t.Fatalf("limits %+v", d.Limits)
			}
		}},
		{"env values recorded only when the operator asks", func(r *Request, cfg *Config) { cfg.AuditEnvValues = true }, func(t *testing.T, d Decision) {
			if !reflect.DeepEqual(d.Facts.Env, map[string]string{"MODE": "x", "API_TOKEN": "s3cret"}) || d.Facts.EnvValuesRecorded == nil || !*d.Facts.EnvValuesRecorded {
				t.Fatalf("facts %v", d.Facts)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, cfg := goodRequest(), decideConfig()
			tc.mutate(&req, &cfg)
			d, err := Decide(req, Caller{}, cfg)
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			tc.check(t, d)
		})
	}
}

// TestDecideAccepts: the whole Decision and decide record of a request
// that uses every field.
func TestDecideAccepts(t *testing.T) {
	req, cfg := goodRequest(), decideConfig()
	d, err := Decide(req, Caller{UID: 1000, GID: 1000, PID: 42}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	want := Decision{
		Runtime: "python", Code: "print(1)", Stdin: []byte("in"),
		Files: []StagedFile{{Path: "data/in.csv", Content: []byte("a,b\n")}}, FileBytes: 4,
		Env: req.Exec.Env, Limits: cfg.Limits(1500), Artifacts: []string{"outputs/*.png"}, Network: "none", Mode: "process",
		Facts: &facts.Decide{
			Runtime: "python", Mode: "process", CodeBytes: ptr(8),
			CodeSHA256: "d287bb7f9d15abdc5b6e98536263815744b6ef21c8f3c839fc434ca70d8efe99", // sha256("print(1)")
			FileCount:  ptr(1), FileBytes: ptr[int64](4),
			EnvNames: []string{"API_TOKEN", "MODE"}, EnvValuesRecorded: ptr(false),
			Artifacts: []string{"outputs/*.png"}, Network: "none",
			Limits: ptr(facts.Limits(cfg.Limits(1500))), StdinBytes: ptr(2),
		},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("decision\n%#v\nwant\n%#v", d, want)
	}
}

// TestDecideIsPure: the same input gives the same answer, the request is
// not modified, and of several file clashes the same one is reported.
func TestDecideIsPure(t *testing.T) {
	req := goodRequest()
	req.Exec.Files = []api.ExecFile{{Path: "z/a"}, {Path: "z"}, {Path: "y/b"}, {Path: "y"}}
	var first string
	for i := 0; i < 20; i++ {
		_, err := Decide(req, Caller{}, decideConfig())
		if err == nil {
			t.Fatal("clashing files accepted")
		}
		if i == 0 {
			first = err.Error()
		} else if err.Error() != first {
			t.Fatalf("answer %d %q differs from %q", i, err.Error(), first)
		}
	}
	before := goodRequest()
	req = goodRequest()
	if _, err := Decide(req, Caller{}, decideConfig()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(req, before) {
		t.Fatal("Decide modified its request")
	}
}

func TestDecideNetwork(t *testing.T) {
	on := decideConfig()
	on.EgressAllow, on.EgressAllowUIDs = "pypi.org", []int{1000, 0}
	for _, tc := range []struct {
		mode   string
		uid    int
		cfg    Config
		want   string
		refuse error
	}{
		{"", 1000, decideConfig(), NetworkNone, nil},
		{"none", 1000, decideConfig(), NetworkNone, nil},
		{"none", 4242, on, NetworkNone, nil},
		{"egress", 1000, on, NetworkEgress, nil},
		{"egress", 0, on, NetworkEgress, nil},
		{"egress", 4242, on, "", errdefs.ErrForbidden},
		{"egress", 1000, decideConfig(), "", errdefs.ErrForbidden},
		{"Egress", 1000, on, "", errdefs.ErrInvalid},
		{"host", 1000, on, "", errdefs.ErrInvalid},
	} {
		got, err := DecideNetwork(tc.mode, Caller{UID: tc.uid}, tc.cfg)
		if got != tc.want || (tc.refuse == nil) != (err == nil) || (err != nil && errdefs.Class(err) != tc.refuse) {
			t.Errorf("DecideNetwork(%q, uid %d) = %q, %v; want %q, %v", tc.mode, tc.uid, got, err, tc.want, tc.refuse)
		}
	}
	d, err := Decide(Request{Exec: func() api.ExecRequest { r := goodRequest().Exec; r.Network = "egress"; return r }()}, Caller{UID: 1000}, on)
	if err != nil || d.Network != NetworkEgress || d.Facts.Network != NetworkEgress {
		t.Errorf("an allowed egress request: %v %+v", err, d)
	}
}
