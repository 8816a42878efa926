package egress

import (
	"fmt"
	"strconv"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Narrow returns a proxy that shares p's resolver, dialer, limits and
// TESTONLY switches but allows only the given exact "host:port"
// destinations, each of which p's own (the operator's) allowlist must
// already allow. It can never widen what the operator allows: an entry p
// does not allow, a wildcard or a missing port is an error. Environment
// builds use it so that untrusted install scripts reach the one named
// index or registry and nothing else the operator lists.
func (p *Proxy) Narrow(hostports []string) (*Proxy, error) {
	if len(hostports) == 0 {
		return nil, fmt.Errorf("%w: egress narrowing to no destination", errdefs.ErrInvalid)
	}
	var a Allowlist
	for _, hp := range hostports {
		r, err := parseRule(hp)
		if err != nil {
			return nil, fmt.Errorf("%w: egress destination %q: %w", errdefs.ErrInvalid, hp, err)
		}
		if r.Wildcard || r.Port == 0 {
			return nil, fmt.Errorf("%w: egress destination %q: want an exact host:port", errdefs.ErrInvalid, hp)
		}
		if _, ok := p.cfg.Allow.Match(r.Host, r.Port); !ok {
			return nil, fmt.Errorf("%w: %s:%s is not on the operator's egress allowlist (--egress-allow)", errdefs.ErrForbidden, r.Host, strconv.Itoa(r.Port))
		}
		a.rules = append(a.rules, r)
	}
	cfg := p.cfg
	cfg.Allow = a
	return &Proxy{cfg: cfg}, nil
}
