package egress

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Environment variables of the TESTONLY switches. They let the integration
// tests stand loopback servers in for the internet; see SECURITY.md
// ("Egress: the TESTONLY switches") for how they are fenced off.
const (
	// EnvTestOnlyResolve maps names to answers instead of DNS:
	// "name=ADDR[+ADDR...][;ADDR...],..."; successive lookups of one name
	// take successive ';'-separated answers (the last one repeats), which is
	// how a test plays a rebinding DNS server.
	EnvTestOnlyResolve = "TESTONLY_EGRESS_RESOLVE"
	// EnvTestOnlyPublicLoopback lists loopback addresses the proxy treats
	// as public ("127.0.0.2,127.0.0.3"). Every other loopback address,
	// 127.0.0.1 (localhost) among them, stays refused.
	EnvTestOnlyPublicLoopback = "TESTONLY_EGRESS_PUBLIC_LOOPBACK"
)

// TestOnly carries the TESTONLY switches. NewProxy refuses a Config that
// sets it unless the binary is a test binary or was built with the
// sandboxd_testonly tag.
type TestOnly struct {
	// Resolve maps a normalised name to successive answers.
	Resolve map[string][][]netip.Addr
	// PublicLoopback are loopback addresses treated as public.
	PublicLoopback []netip.Addr
}

// testOnlyAllowed reports whether the TESTONLY switches may be honoured:
// only in a `go test` binary or one built with -tags sandboxd_testonly
// (never `make build`).
func testOnlyAllowed() bool { return testOnlyBuild || testing.Testing() }

// TestOnlyFromEnv reads the TESTONLY variables through getenv. It returns
// nil when neither is set, and an error when one is set in a binary that
// may not honour them: a production supervisor refuses to start rather
// than ignore a switch someone meant to take effect.
func TestOnlyFromEnv(getenv func(string) string) (*TestOnly, error) {
	res, pub := getenv(EnvTestOnlyResolve), getenv(EnvTestOnlyPublicLoopback)
	if res == "" && pub == "" {
		return nil, nil
	}
	if !testOnlyAllowed() {
		return nil, fmt.Errorf("%w: %s/%s are set, but this binary was not built for tests (-tags sandboxd_testonly); unset them",
			errdefs.ErrInvalid, EnvTestOnlyResolve, EnvTestOnlyPublicLoopback)
	}
	t := &TestOnly{Resolve: map[string][][]netip.Addr{}}
	for _, s := range splitList(pub, ",") {
		a, err := netip.ParseAddr(s)
		if err != nil || !a.IsLoopback() {
			return nil, fmt.Errorf("%w: %s: %q is not a loopback address", errdefs.ErrInvalid, EnvTestOnlyPublicLoopback, s)
		}
		t.PublicLoopback = append(t.PublicLoopback, a)
	}
	for _, entry := range splitList(res, ",") {
		name, answers, ok := strings.Cut(entry, "=")
		if !ok {
			return nil, fmt.Errorf("%w: %s: entry %q: want name=addr", errdefs.ErrInvalid, EnvTestOnlyResolve, entry)
		}
		for _, ans := range strings.Split(answers, ";") {
			var group []netip.Addr
			for _, s := range splitList(ans, "+") {
				a, err := netip.ParseAddr(s)
				if err != nil {
					return nil, fmt.Errorf("%w: %s: %w", errdefs.ErrInvalid, EnvTestOnlyResolve, err)
				}
				group = append(group, a)
			}
			t.Resolve[strings.ToLower(name)] = append(t.Resolve[strings.ToLower(name)], group)
		}
	}
	return t, nil
}

func splitList(s, sep string) []string {
	var out []string
	for _, p := range strings.Split(s, sep) {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (t *TestOnly) publicLoopback(a netip.Addr) bool {
	if t == nil {
		return false
	}
	for _, p := range t.PublicLoopback {
		if p == a.Unmap() {
			return true
		}
	}
	return false
}
