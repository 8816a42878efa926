package policy

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// flag.Value implementations bound to Config fields. They are shared by
// flags and env variables, so both accept exactly the same syntax.

type stringValue string

func (v *stringValue) String() string     { return string(*v) }
func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }

type boolValue bool

func (v *boolValue) String() string { return strconv.FormatBool(bool(*v)) }
func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return fmt.Errorf("want true or false, got %q", s)
	}
	*v = boolValue(b)
	return nil
}

// IsBoolFlag lets "--audit-fsync" stand for "--audit-fsync=true".
func (v *boolValue) IsBoolFlag() bool { return true }

type intValue int

func (v *intValue) String() string { return strconv.Itoa(int(*v)) }
func (v *intValue) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 0)
	if err != nil {
		return fmt.Errorf("want an integer, got %q", s)
	}
	*v = intValue(n)
	return nil
}

type int64Value int64

func (v *int64Value) String() string { return strconv.FormatInt(int64(*v), 10) }
func (v *int64Value) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer, got %q", s)
	}
	*v = int64Value(n)
	return nil
}

type uint64Value uint64

func (v *uint64Value) String() string { return strconv.FormatUint(uint64(*v), 10) }
func (v *uint64Value) Set(s string) error {
	n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return fmt.Errorf("want a non-negative integer, got %q", s)
	}
	*v = uint64Value(n)
	return nil
}

type floatValue float64

func (v *floatValue) String() string { return strconv.FormatFloat(float64(*v), 'g', -1, 64) }
func (v *floatValue) Set(s string) error {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("want a number, got %q", s)
	}
	*v = floatValue(f)
	return nil
}

// sizeValue is a byte count: a plain integer, or one with a binary suffix
// (K, KiB, M, MiB, G, GiB; case-insensitive). Decimal units are not offered
// because the defaults are all powers of two and "1G" meaning 10^9 would
// surprise nobody less than it surprises somebody.
type sizeValue int64

func (v *sizeValue) String() string { return strconv.FormatInt(int64(*v), 10) }
func (v *sizeValue) Set(s string) error {
	n, err := ParseSize(s)
	if err != nil {
		return err
	}
	*v = sizeValue(n)
	return nil
}

// ParseSize parses a byte count such as "262144", "256KiB", "1M" or "2GiB".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRightFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != ' ' })
	unit := strings.ToLower(strings.TrimSpace(t[len(num):]))
	num = strings.TrimSpace(num)
	var mult int64
	switch unit {
	case "", "b":
		mult = 1
	case "k", "kib":
		mult = 1 << 10
	case "m", "mib":
		mult = 1 << 20
	case "g", "gib":
		mult = 1 << 30
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q (want bytes or K, KiB, M, MiB, G, GiB)", s, unit)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q: want a non-negative integer with an optional unit", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q overflows", s)
	}
	return n * mult, nil
}

// idListValue is a list of numeric uids or gids, given as a comma list, by
// repeating the flag, or both. The first Set replaces the list rather than
// appending to it, so a flag replaces what the environment gave instead of
// merging with it ("flag wins over env"). Names are not resolved here: the
// allow lists are compared with kernel credentials, which are numbers, and
// resolving names at start-up would make the policy depend on NSS.
type idListValue struct {
	p   *[]int
	set bool
}

func (v *idListValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	parts := make([]string, len(*v.p))
	for i, id := range *v.p {
		parts[i] = strconv.Itoa(id)
	}
	return strings.Join(parts, ",")
}

func (v *idListValue) Set(s string) error {
	var ids []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 || n > maxUnixID {
			return fmt.Errorf("%q is not a numeric id (0..%d)", f, maxUnixID)
		}
		ids = append(ids, int(n))
	}
	if !v.set {
		*v.p = nil
		v.set = true
	}
	*v.p = append(*v.p, ids...)
	return nil
}

// wordListValue is a comma-separated, repeatable list of words; like
// idListValue, the first Set replaces what the environment gave.
type wordListValue struct {
	p   *[]string
	set bool
}

func (v *wordListValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v *wordListValue) Set(s string) error {
	if !v.set {
		*v.p = nil
		v.set = true
	}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			*v.p = append(*v.p, f)
		}
	}
	return nil
}

// durationValue is a Go duration ("90m", "720h") or a whole number of days
// with a "d" suffix ("30d"), the unit retention settings are thought in.
type durationValue time.Duration

func (v *durationValue) String() string {
	d := time.Duration(*v)
	if d > 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return d.String()
}

func (v *durationValue) Set(s string) error {
	t := strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(t, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > math.MaxInt64/int64(24*time.Hour) {
			return fmt.Errorf("duration %q: want a non-negative whole number of days before \"d\"", s)
		}
		*v = durationValue(time.Duration(n) * 24 * time.Hour)
		return nil
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		return fmt.Errorf("duration %q: want a Go duration such as 90m or 720h, or days such as 30d", s)
	}
	*v = durationValue(d)
	return nil
}

// listenValue is the repeatable --listen: "tcp://HOST:PORT", repeated or
// comma-separated. As with idListValue, the first Set replaces the list
// (a flag replaces the environment's value).
type listenValue struct {
	p   *[]string
	set bool
}

func (v *listenValue) String() string {
	if v == nil || v.p == nil {
		return ""
	}
	return strings.Join(*v.p, ",")
}

func (v *listenValue) Set(s string) error {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if _, err := ParseListen(f); err != nil {
			return err
		}
		out = append(out, f)
	}
	if !v.set {
		*v.p = nil
		v.set = true
	}
	*v.p = append(*v.p, out...)
	return nil
}

// ParseListen returns the host:port of a "tcp://HOST:PORT" listen address
// (HOST an IP literal, [IPv6], a name, or empty for every interface; PORT
// 0..65535).
func ParseListen(s string) (string, error) {
	hp, ok := strings.CutPrefix(s, "tcp://")
	if !ok {
		return "", fmt.Errorf("%q: want tcp://HOST:PORT (the Unix socket is --socket)", s)
	}
	host, port, err := net.SplitHostPort(hp)
	if err != nil {
		return "", fmt.Errorf("%q: %w", s, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 {
		return "", fmt.Errorf("%q: port %q is not in 0..65535 (0: the kernel picks one, logged at start)", s, port)
	}
	if strings.ContainsAny(host, "/ ") {
		return "", fmt.Errorf("%q: bad host %q", s, host)
	}
	return hp, nil
}

// IsLoopbackListen reports whether a listen address binds loopback only: a
// loopback IP literal or "localhost". An empty host, 0.0.0.0 or [::] is
// every interface; any other name could resolve anywhere.
func IsLoopbackListen(s string) bool {
	hp, err := ParseListen(s)
	if err != nil {
		return false
	}
	host, _, _ := net.SplitHostPort(hp)
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// WarmPoolSize is --warm-pool: the floor and the cap of the warm
// sandboxes kept per language. Min = Max is a fixed size; Max 0 disables
// the pool.
type WarmPoolSize struct{ Min, Max int }

// String is the flag's syntax: "N" for a fixed size, "MIN:MAX" otherwise.
func (w WarmPoolSize) String() string {
	if w.Min == w.Max {
		return strconv.Itoa(w.Max)
	}
	return strconv.Itoa(w.Min) + ":" + strconv.Itoa(w.Max)
}

// Validate checks 0 <= Min <= Max <= MaxWarmPool.
func (w WarmPoolSize) Validate() error {
	switch {
	case w.Min < 0 || w.Max < 0:
		return errors.New("negative")
	case w.Min > w.Max:
		return errors.New("MIN above MAX")
	case w.Max > MaxWarmPool:
		return fmt.Errorf("above %d", MaxWarmPool)
	}
	return nil
}

// ParseWarmPoolSize parses "N" (N:N) or "MIN:MAX"; Validate checks the range.
func ParseWarmPoolSize(s string) (WarmPoolSize, error) {
	lo, hi, pair := strings.Cut(strings.TrimSpace(s), ":")
	if !pair {
		hi = lo
	}
	minN, err1 := strconv.Atoi(strings.TrimSpace(lo))
	maxN, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if err1 != nil || err2 != nil {
		return WarmPoolSize{}, fmt.Errorf("want N or MIN:MAX (integers), got %q", s)
	}
	return WarmPoolSize{Min: minN, Max: maxN}, nil
}

type warmPoolValue struct{ p *WarmPoolSize }

func (v *warmPoolValue) String() string {
	if v.p == nil {
		return ""
	}
	return v.p.String()
}

func (v *warmPoolValue) Set(s string) error {
	w, err := ParseWarmPoolSize(s)
	if err != nil {
		return err
	}
	*v.p = w
	return nil
}
