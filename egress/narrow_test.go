package egress

import (
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestNarrow(t *testing.T) {
	allow, err := ParseAllowlist("registry.npmjs.org,*.pythonhosted.org:443,pypi.test:8443")
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{Allow: allow})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in    []string
		class error
	}{
		{[]string{"registry.npmjs.org:443"}, nil},
		{[]string{"files.pythonhosted.org:443", "pypi.test:8443"}, nil},
		{[]string{"registry.npmjs.org:8080"}, errdefs.ErrForbidden}, // the operator allows 80/443 only
		{[]string{"evil.example:443"}, errdefs.ErrForbidden},
		{[]string{"pythonhosted.org:443"}, errdefs.ErrForbidden}, // a wildcard is strictly below
		{[]string{"*.pythonhosted.org:443"}, errdefs.ErrInvalid},
		{[]string{"registry.npmjs.org"}, errdefs.ErrInvalid}, // no port
		{[]string{"127.0.0.1:443"}, errdefs.ErrInvalid},
		{nil, errdefs.ErrInvalid},
	} {
		n, err := p.Narrow(tc.in)
		if tc.class == nil {
			if err != nil {
				t.Errorf("%v: %v", tc.in, err)
				continue
			}
			if len(n.Allowlist().Rules()) != len(tc.in) {
				t.Errorf("%v: rules %v", tc.in, n.Allowlist().Rules())
			}
			continue
		}
		if !errors.Is(err, tc.class) {
			t.Errorf("%v: got %v, want %v", tc.in, err, tc.class)
		}
	}
	n, _ := p.Narrow([]string{"registry.npmjs.org:443"})
	if _, ok := n.Allowlist().Match("files.pythonhosted.org", 443); ok {
		t.Error("the narrowed proxy still allows another operator destination")
	}
	if _, ok := n.Allowlist().Match("registry.npmjs.org", 80); ok {
		t.Error("the narrowed proxy allows another port")
	}
}
