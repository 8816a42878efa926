package policy

import (
	"encoding/json"
	"errors"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

func opConfig() Config {
	c := Defaults()
	c.ExecTimeoutMS = 20_000
	c.ExecTimeoutMaxMS = 40_000
	c.IdleTTLSeconds = 600
	c.MaxSessions = 8
	c.MaxConcurrentExecs = 3
	return c
}

func TestApplyPatchValidation(t *testing.T) {
	s3 := opConfig()
	s3.ArchiveBackend, s3.S3Endpoint, s3.S3Bucket = "s3", "http://127.0.0.1:9000", "b"
	for _, tc := range []struct {
		name, patch string
		op          *Config
		want        string // substring of the error; "" means accepted
	}{
		{"lower timeout", `{"exec_timeout_ms": 1000}`, nil, ""},
		{"at cap", `{"exec_timeout_ms": 20000}`, nil, ""},
		{"above cap", `{"exec_timeout_ms": 20001}`, nil, "cap 20000 (the operator's --exec-timeout)"},
		{"above max cap", `{"exec_timeout_max_ms": 50000}`, nil, "cap 40000"},
		{"sessions above cap", `{"max_sessions": 9}`, nil, "cap 8"},
		{"sessions zero", `{"max_sessions": 0}`, nil, ""},
		{"concurrent zero", `{"max_concurrent_execs": 0}`, nil, "below 1"},
		{"ttl negative", `{"idle_ttl_seconds": -1}`, nil, "below 1"},
		{"ttl above cap", `{"idle_ttl_seconds": 601}`, nil, "cap 600"},
		{"unknown key", `{"memory": 1}`, nil, `unknown setting "memory"`},
		{"unknown s3 key", `{"s3_endpoint": "http://x"}`, nil, "unknown setting"},
		{"s3 credentials refused", `{"archive_s3_credentials": "AKIA"}`, nil, "never accepted over the API"},
		{"s3 secret refused", `{"archive_s3_secret_access_key": "x"}`, nil, "never accepted over the API"},
		{"string for int", `{"max_sessions": "3"}`, nil, "want an integer"},
		{"float for int", `{"max_sessions": 2.5}`, nil, "want an integer"},
		{"empty", `{}`, nil, "no setting given"},
		{"not object", `[1]`, nil, "JSON object"},
		{"trailing", `{"max_sessions": 1} {}`, nil, "trailing"},
		{"backend none", `{"archive_backend": "none"}`, nil, ""},
		{"backend bogus", `{"archive_backend": "ftp"}`, nil, `"ftp" is not one of local, none`},
		{"s3 not allowed", `{"archive_backend": "s3"}`, nil, "--admin-archive-backends"},
		{"local when s3", `{"archive_backend": "local"}`, &s3, "--admin-archive-backends"},
		{"s3 configured", `{"archive_backend": "s3"}`, &s3, ""},
		{"default above new max", `{"exec_timeout_max_ms": 10000}`, nil, "above exec_timeout_max_ms 10000"},
		{"both lowered", `{"exec_timeout_max_ms": 10000, "exec_timeout_ms": 5000}`, nil, ""},
		{"reset", `{"exec_timeout_ms": null}`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := opConfig()
			if tc.op != nil {
				op = *tc.op
			}
			_, err := ApplyPatch(op, Overrides{}, []byte(tc.patch), "uid:0")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("err %v is not errdefs.ErrInvalid", err)
			}
		})
	}
}

func TestApplyPatchKeepsOldOnError(t *testing.T) {
	op := opConfig()
	cur, err := ApplyPatch(op, Overrides{}, []byte(`{"max_sessions": 2}`), "uid:0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ApplyPatch(op, cur, []byte(`{"max_sessions": 1, "bogus": 1}`), "uid:0")
	if err == nil || got.Ints[SettingMaxSessions] != 2 || cur.Ints[SettingMaxSessions] != 2 {
		t.Fatalf("a refused patch changed something: %v %+v %+v", err, got, cur)
	}
}

func TestEffectiveAndReclamp(t *testing.T) {
	for _, tc := range []struct {
		name      string
		ov        Overrides
		caps      func(*Config)
		wantEff   func(Config) bool
		wantNotes int
	}{
		{"under caps kept", Overrides{Ints: map[string]int64{SettingMaxSessions: 2, SettingExecTimeout: 1000}}, nil,
			func(c Config) bool { return c.MaxSessions == 2 && c.ExecTimeoutMS == 1000 }, 0},
		{"cap lowered at restart", Overrides{Ints: map[string]int64{SettingMaxSessions: 7}}, func(c *Config) { c.MaxSessions = 4 },
			func(c Config) bool { return c.MaxSessions == 4 }, 1},
		{"default above lowered max", Overrides{Ints: map[string]int64{SettingExecTimeout: 20000, SettingExecTimeoutMax: 30000}},
			func(c *Config) { c.ExecTimeoutMaxMS = 10000; c.ExecTimeoutMS = 10000 },
			func(c Config) bool { return c.ExecTimeoutMS == 10000 && c.ExecTimeoutMaxMS == 10000 }, 2},
		{"backend no longer the operator's", Overrides{ArchiveBackend: "s3"}, nil,
			func(c Config) bool { return c.ArchiveBackend == "local" }, 1},
		{"unknown dropped", Overrides{Ints: map[string]int64{"memory": 1}}, nil, func(Config) bool { return true }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := opConfig()
			if tc.caps != nil {
				tc.caps(&op)
			}
			ov, notes := Reclamp(op, tc.ov)
			eff := Effective(op, ov)
			if !tc.wantEff(eff) || len(notes) != tc.wantNotes {
				t.Fatalf("effective %+v notes %q", ov, notes)
			}
			if err := eff.Validate(); err != nil {
				t.Fatalf("effective config invalid: %v", err)
			}
		})
	}
}

func TestSettingStates(t *testing.T) {
	op := opConfig()
	ov, err := ApplyPatch(op, Overrides{}, []byte(`{"max_sessions": 2}`), "uid:0")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]SettingState{}
	for _, s := range SettingStates(Defaults(), op, ov) {
		got[s.Key] = s
	}
	if len(got) != len(SettingKeys()) {
		t.Fatalf("states %v, keys %v", got, SettingKeys())
	}
	for key, want := range map[string]SettingState{
		SettingMaxSessions:    {Key: SettingMaxSessions, Value: int64(2), Cap: int64(8), Source: SourceAdmin, SetBy: "uid:0"},
		SettingExecTimeout:    {Key: SettingExecTimeout, Value: int64(20000), Cap: int64(20000), Source: SourceFlag},
		SettingArchiveBackend: {Key: SettingArchiveBackend, Value: "local", Cap: "local|none", Source: SourceDefault},
	} {
		if got[key] != want {
			t.Errorf("%s = %+v, want %+v", key, got[key], want)
		}
	}
	b, _ := json.Marshal(ov)
	var back Overrides
	if err := json.Unmarshal(b, &back); err != nil || back.Ints[SettingMaxSessions] != 2 {
		t.Fatalf("round trip %s: %+v %v", b, back, err)
	}
}

func TestRedactSetting(t *testing.T) {
	if RedactSetting("s3_secret_key", "abc") != "set" || RedactSetting("s3_secret_key", "") != "unset" || RedactSetting(SettingMaxSessions, 3) != 3 {
		t.Fatal("redaction rule broken")
	}
}

// TestSettingsPatchDocumentsEveryKey: api.SettingsPatch (the documented
// PATCH body) names exactly the live settings.
func TestSettingsPatchDocumentsEveryKey(t *testing.T) {
	var keys []string
	typ := reflect.TypeFor[api.SettingsPatch]()
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	sort.Strings(keys)
	if !reflect.DeepEqual(keys, SettingKeys()) {
		t.Fatalf("api.SettingsPatch %v, live settings %v", keys, SettingKeys())
	}
}
