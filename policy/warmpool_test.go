package policy

import (
	"strings"
	"testing"
)

// TestWarmPoolFlag: --warm-pool N is a fixed N (N:N), MIN:MAX a floor and
// a cap, 0 disables; the env variable takes the same syntax; a floor above
// the cap, a negative or a cap beyond MaxWarmPool is refused at start.
func TestWarmPoolFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		want    WarmPoolSize
		wantErr string
	}{
		{"default", nil, nil, WarmPoolSize{DefaultWarmPool, DefaultWarmPool}, ""},
		{"fixed", nil, []string{"--warm-pool", "3"}, WarmPoolSize{3, 3}, ""},
		{"off", nil, []string{"--warm-pool", "0"}, WarmPoolSize{0, 0}, ""},
		{"range", nil, []string{"--warm-pool", "1:4"}, WarmPoolSize{1, 4}, ""},
		{"floor zero", nil, []string{"--warm-pool=0:8"}, WarmPoolSize{0, 8}, ""},
		{"env", map[string]string{"SANDBOXD_WARM_POOL": " 2 : 6 "}, nil, WarmPoolSize{2, 6}, ""},
		{"flag over env", map[string]string{"SANDBOXD_WARM_POOL": "2:6"}, []string{"--warm-pool", "1"}, WarmPoolSize{1, 1}, ""},
		{"at the cap", nil, []string{"--warm-pool", "1:32"}, WarmPoolSize{1, MaxWarmPool}, ""},
		{"floor above cap", nil, []string{"--warm-pool", "4:1"}, WarmPoolSize{}, "--warm-pool: MIN above MAX"},
		{"cap too large", nil, []string{"--warm-pool", "1:33"}, WarmPoolSize{}, "--warm-pool: above 32"},
		{"fixed too large", nil, []string{"--warm-pool", "40"}, WarmPoolSize{}, "--warm-pool: above 32"},
		{"negative", nil, []string{"--warm-pool", "-1:2"}, WarmPoolSize{}, "--warm-pool: negative"},
		{"not a number", nil, []string{"--warm-pool", "a:b"}, WarmPoolSize{}, "want N or MIN:MAX"},
		{"three parts", nil, []string{"--warm-pool", "1:2:3"}, WarmPoolSize{}, "want N or MIN:MAX"},
		{"empty side", nil, []string{"--warm-pool", "1:"}, WarmPoolSize{}, "want N or MIN:MAX"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(newFS(), tc.args, envMap(tc.env))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Load: err %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.WarmPool != tc.want {
				t.Fatalf("WarmPool %+v, want %+v", c.WarmPool, tc.want)
			}
		})
	}
}

func TestWarmPoolSizeString(t *testing.T) {
	for in, want := range map[WarmPoolSize]string{{2, 2}: "2", {0, 0}: "0", {1, 4}: "1:4"} {
		if got := in.String(); got != want {
			t.Errorf("%+v.String() = %q, want %q", in, got, want)
		}
		back, err := ParseWarmPoolSize(want)
		if err != nil || back != in {
			t.Errorf("ParseWarmPoolSize(%q) = %+v, %v; want %+v", want, back, err, in)
		}
	}
}
