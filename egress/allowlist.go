package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Rule is one allowlist entry: a host name, optionally with a leading
// "*." wildcard (any name strictly below Host, not Host itself), and a
// port (0: the web ports 80 and 443 only).
type Rule struct {
	Host     string // lower case, no trailing dot; without the "*." prefix
	Wildcard bool
	Port     int
}

// String renders the rule as the operator wrote it (normalised).
func (r Rule) String() string {
	s := r.Host
	if r.Wildcard {
		s = "*." + s
	}
	if r.Port != 0 {
		s += ":" + strconv.Itoa(r.Port)
	}
	return s
}

// Allowlist is the operator's list of destinations. The zero value allows
// nothing, which is the default.
type Allowlist struct {
	rules []Rule
}

// Rules returns a copy of the rules, for display.
func (a Allowlist) Rules() []Rule { return append([]Rule(nil), a.rules...) }

// Empty reports whether nothing is allowed.
func (a Allowlist) Empty() bool { return len(a.rules) == 0 }

// ParseAllowlist parses the --egress-allow value: comma-separated
// `host`, `host:port`, `*.domain` or `*.domain:port`. IP literals are
// refused: an address is not a destination an operator can vouch for (and
// would bypass name-based SNI checking).
func ParseAllowlist(s string) (Allowlist, error) {
	var a Allowlist
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		r, err := parseRule(item)
		if err != nil {
			return Allowlist{}, fmt.Errorf("%w: egress allowlist entry %q: %w", errdefs.ErrInvalid, item, err)
		}
		a.rules = append(a.rules, r)
	}
	return a, nil
}

func parseRule(item string) (Rule, error) {
	var r Rule
	host := item
	if h, p, ok := strings.Cut(item, ":"); ok {
		port, err := parsePort(p)
		if err != nil {
			return r, err
		}
		host, r.Port = h, port
	}
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		r.Wildcard, host = true, rest
	}
	name, err := NormalizeHost(host)
	if err != nil {
		return r, err
	}
	if r.Wildcard && !strings.Contains(name, ".") {
		return r, fmt.Errorf("wildcard over a top-level domain")
	}
	r.Host = name
	return r, nil
}

func parsePort(p string) (int, error) {
	if p == "" || len(p) > 5 || strings.TrimLeft(p, "0123456789") != "" {
		return 0, fmt.Errorf("port %q: want 1-65535", p)
	}
	n, _ := strconv.Atoi(p)
	if n < 1 || n > 65535 {
		return 0, fmt.Errorf("port %q: want 1-65535", p)
	}
	return n, nil
}

// NormalizeHost lower-cases a DNS name, strips one trailing dot and checks
// it is an ASCII host name (letters, digits, '-', '.'; labels 1-63; at most
// 253). IP literals are refused. Internationalised names travel as
// punycode ("xn--"), which this accepts as ASCII. Only ASCII letters are
// lower-cased: strings.ToLower would map KELVIN SIGN (U+212A) to 'k' and
// so let a name no server would route the same pass for an allowed one.
func NormalizeHost(h string) (string, error) {
	h = strings.TrimSuffix(asciiLower(h), ".")
	if h == "" || len(h) > 253 {
		return "", fmt.Errorf("host name %q: want 1-253 characters", trunc(h))
	}
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return "", fmt.Errorf("%q is an IP literal: name the host", trunc(h))
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("host name %q: empty or over-long label", trunc(h))
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("host name %q: character %q not allowed", trunc(h), c)
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("host name %q: label starts or ends with '-'", trunc(h))
		}
	}
	// An all-numeric last label is how inet_aton-style forms ("127.1",
	// "0x7f.1", "2130706433") hide an address from ParseAddr.
	if last := h[strings.LastIndexByte(h, '.')+1:]; strings.TrimLeft(last, "0123456789") == "" ||
		strings.HasPrefix(last, "0x") {
		return "", fmt.Errorf("%q looks like a numeric address: name the host", trunc(h))
	}
	return h, nil
}

// asciiLower lower-cases A-Z and leaves every other byte as it is (the
// caller refuses anything that is not a host-name byte).
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Match returns the rule that allows host:port, if any. host must already
// be normalised (NormalizeHost).
func (a Allowlist) Match(host string, port int) (Rule, bool) {
	for _, r := range a.rules {
		if !r.portOK(port) {
			continue
		}
		if r.Wildcard {
			if strings.HasSuffix(host, "."+r.Host) {
				return r, true
			}
		} else if host == r.Host {
			return r, true
		}
	}
	return Rule{}, false
}

func (r Rule) portOK(port int) bool {
	if r.Port == 0 {
		return port == 80 || port == 443
	}
	return port == r.Port
}

func trunc(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
