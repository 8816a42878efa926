package egress

import (
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestParseAllowlistErrors(t *testing.T) {
	for _, bad := range []string{
		"10.0.0.1", "[::1]:443", "pypi.org:0", "pypi.org:65536", "pypi.org:", "pypi.org:x",
		"*.com", "*", "a..b", "-a.org", "a_b.org", "exa mple.org", "127.1", "0x7f.1", "2130706433",
		"pypi.org:443:1", "**.pypi.org", "pypi.*.org",
	} {
		if _, err := ParseAllowlist(bad); err == nil {
			t.Errorf("ParseAllowlist(%q) accepted", bad)
		} else if !errors.Is(err, errdefs.ErrInvalid) {
			t.Errorf("ParseAllowlist(%q): %v is not ErrInvalid", bad, err)
		}
	}
	a, err := ParseAllowlist("")
	if err != nil || !a.Empty() {
		t.Fatalf("empty list: %v %v", a, err)
	}
}

func TestAllowlistMatch(t *testing.T) {
	a, err := ParseAllowlist(" PyPI.org. ,files.pythonhosted.org:443,*.npmjs.org,api.example.com:8443")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		host string
		port int
		want bool
	}{
		{"pypi.org", 443, true},
		{"pypi.org", 80, true},
		{"pypi.org", 22, false},
		{"www.pypi.org", 443, false},
		{"evilpypi.org", 443, false},
		{"pypi.org.evil.com", 443, false},
		{"files.pythonhosted.org", 443, true},
		{"files.pythonhosted.org", 80, false},
		{"registry.npmjs.org", 443, true},
		{"a.b.npmjs.org", 443, true},
		{"npmjs.org", 443, false},
		{"evilnpmjs.org", 443, false},
		{"api.example.com", 8443, true},
		{"api.example.com", 443, false},
	} {
		_, got := a.Match(tc.host, tc.port)
		if got != tc.want {
			t.Errorf("Match(%s:%d) = %v, want %v", tc.host, tc.port, got, tc.want)
		}
	}
	var none Allowlist
	if _, ok := none.Match("pypi.org", 443); ok {
		t.Error("the zero allowlist allowed something")
	}
}

// TestNormalizeHostASCIIOnly: only ASCII letters are lower-cased; a name
// that Unicode case folding would turn into an allowed one is refused.
func TestNormalizeHostASCIIOnly(t *testing.T) {
	for _, bad := range []string{"\u212aey.example", "\u017fecret.example", "KEY.EXAMPL\u0130", "k\xc3\xa9y.example"} {
		if got, err := NormalizeHost(bad); err == nil {
			t.Errorf("NormalizeHost(%q) = %q, accepted", bad, got)
		}
	}
	if got, err := NormalizeHost("Key.Example."); err != nil || got != "key.example" {
		t.Errorf("NormalizeHost(Key.Example.) = %q, %v", got, err)
	}
}
