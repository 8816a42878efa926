package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Live settings: the few operator settings an admin may
// change through the API without a restart. The operator's flags and
// SANDBOXD_* variables stay the hard ceilings: an override can only tighten
// a value under its flag, never pass it, so a compromised admin client can
// never grant more than the operator did.

// Keys of the live settings, as the API and sandboxctl spell them.
const (
	SettingExecTimeout        = "exec_timeout_ms"
	SettingExecTimeoutMax     = "exec_timeout_max_ms"
	SettingIdleTTL            = "idle_ttl_seconds"
	SettingMaxSessions        = "max_sessions"
	SettingMaxConcurrentExecs = "max_concurrent_execs"
	SettingArchiveBackend     = "archive_backend"
)

// Sources of an effective value.
const (
	SourceDefault = "default"
	SourceFlag    = "flag/env"
	SourceAdmin   = "admin"
)

// intSetting is one integer live setting: its cap is the operator's value of
// the same flag, min is the smallest value the flag itself accepts.
type intSetting struct {
	key  string
	flag string
	min  int64
	get  func(Config) int64
	set  func(*Config, int64)
}

func intSettings() []intSetting {
	return []intSetting{
		{SettingExecTimeout, "exec-timeout", 1, func(c Config) int64 { return c.ExecTimeoutMS }, func(c *Config, v int64) { c.ExecTimeoutMS = v }},
		{SettingExecTimeoutMax, "exec-timeout-max", 1, func(c Config) int64 { return c.ExecTimeoutMaxMS }, func(c *Config, v int64) { c.ExecTimeoutMaxMS = v }},
		{SettingIdleTTL, "idle-ttl", 1, func(c Config) int64 { return c.IdleTTLSeconds }, func(c *Config, v int64) { c.IdleTTLSeconds = v }},
		// 0 sessions is what the flag allows too: sessions off.
		{SettingMaxSessions, "max-sessions", 0, func(c Config) int64 { return int64(c.MaxSessions) }, func(c *Config, v int64) { c.MaxSessions = int(v) }},
		{SettingMaxConcurrentExecs, "max-concurrent-execs", 1, func(c Config) int64 { return int64(c.MaxConcurrentExecs) }, func(c *Config, v int64) { c.MaxConcurrentExecs = int(v) }},
	}
}

// SettingKeys lists every live setting key, sorted.
func SettingKeys() []string {
	keys := []string{SettingArchiveBackend}
	for _, s := range s3Settings() {
		keys = append(keys, s.key)
	}
	for _, s := range intSettings() {
		keys = append(keys, s.key)
	}
	sort.Strings(keys)
	return keys
}

// Overrides are the values an admin set; a key that is absent keeps the
// operator's value. This is what the state directory persists.
type Overrides struct {
	Ints           map[string]int64 `json:"ints,omitempty"`
	ArchiveBackend string           `json:"archive_backend,omitempty"`
	// S3 holds the archive_s3_* settings as text (path style as
	// "true"/"false"); a present "" prefix is an override too.
	S3 map[string]string `json:"s3,omitempty"`
	// SetBy is, per overridden setting, the caller identity that set it
	// (launch.Caller.ID: "key:alice", "uid:0"), so that a setting whose
	// setter loses its admin key can be found (Revoked). A setting
	// persisted before setters were recorded has none.
	SetBy map[string]string `json:"set_by,omitempty"`
}

// Clone returns a deep copy.
func (o Overrides) Clone() Overrides {
	c := Overrides{ArchiveBackend: o.ArchiveBackend, Ints: map[string]int64{}}
	for k, v := range o.Ints {
		c.Ints[k] = v
	}
	if o.S3 != nil {
		c.S3 = maps.Clone(o.S3)
	}
	if o.SetBy != nil {
		c.SetBy = maps.Clone(o.SetBy)
	}
	return c
}

// Count is the number of settings overridden.
func (o Overrides) Count() int {
	n := len(o.Ints) + len(o.S3)
	if o.ArchiveBackend != "" {
		n++
	}
	return n
}

// SecretSetting reports whether a key's value is a secret, which audit
// records and answers show only as "set" or "unset", and which a patch can
// never set. None of the settable live settings is one: S3 credentials
// come from the operator's file or environment, never from a request, and
// are shown only as set or unset (SettingS3Credentials); every new setting
// passes through this rule.
func SecretSetting(key string) bool {
	return strings.Contains(key, "secret") || strings.Contains(key, "credential") || strings.Contains(key, "password") || strings.Contains(key, "token")
}

// RedactSetting is what an audit record or an answer may show of v.
func RedactSetting(key string, v any) any {
	if !SecretSetting(key) {
		return v
	}
	if v == nil || v == "" {
		return "unset"
	}
	return "set"
}

func settingInvalid(format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(format, args...), "", nil)
}

// ApplyPatch returns cur changed by patch, a JSON object of key to value
// (null resets a key to the operator's value), checked against op, the
// operator's configuration: unknown keys, wrong types and values out of
// range or above their cap are refused (errdefs.ErrInvalid) with a message
// naming the key and the cap; nothing is clamped silently. Each key the
// patch sets is recorded as set by setBy, the caller's identity; a reset
// key loses its setter.
func ApplyPatch(op Config, cur Overrides, patch []byte, setBy string) (Overrides, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(patch))
	if err := dec.Decode(&raw); err != nil {
		return cur, settingInvalid("settings patch: %v; want a JSON object of setting to value", err)
	}
	if dec.More() {
		return cur, settingInvalid("settings patch: trailing data after the JSON object")
	}
	if len(raw) == 0 {
		return cur, settingInvalid("settings patch: no setting given; known settings: %s", strings.Join(SettingKeys(), ", "))
	}
	next := cur.Clone()
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if err := applyOne(op, &next, k, raw[k]); err != nil {
			return cur, err
		}
		next.recordSetter(k, setBy, isNull(raw[k]))
	}
	if err := checkCross(op, Effective(op, next)); err != nil {
		return cur, err
	}
	return next, nil
}

func applyOne(op Config, next *Overrides, key string, v json.RawMessage) error {
	if handled, err := applyArchive(op, next, key, v); handled {
		return err
	}
	for _, s := range intSettings() {
		if s.key != key {
			continue
		}
		if isNull(v) {
			delete(next.Ints, key)
			return nil
		}
		var n int64
		if err := json.Unmarshal(v, &n); err != nil {
			return settingInvalid("%s: want an integer", key)
		}
		limit := s.get(op)
		if n > limit {
			return settingInvalid("%s: %d is above its cap %d (the operator's --%s); an admin can only tighten it", key, n, limit, s.flag)
		}
		if n < s.min {
			return settingInvalid("%s: %d is below %d", key, n, s.min)
		}
		next.Ints[key] = n
		return nil
	}
	return settingInvalid("unknown setting %q; known settings: %s", key, strings.Join(SettingKeys(), ", "))
}

// checkCross refuses combinations the flags refuse too.
func checkCross(op, c Config) error {
	if c.ExecTimeoutMS > c.ExecTimeoutMaxMS {
		return settingInvalid("%s: %d ms is above %s %d ms: an exec without a timeout would be refused", SettingExecTimeout, c.ExecTimeoutMS, SettingExecTimeoutMax, c.ExecTimeoutMaxMS)
	}
	return checkArchive(op, c)
}

// Effective is op with the overrides applied, each clamped to its cap (an
// override persisted under larger caps never passes the current ones).
func Effective(op Config, o Overrides) Config {
	c := op
	for _, s := range intSettings() {
		if v, ok := o.Ints[s.key]; ok {
			s.set(&c, min(max(v, s.min), s.get(op)))
		}
	}
	effectiveArchive(op, o, &c)
	return c
}

// Reclamp returns o re-clamped against op's caps, as the supervisor does at
// start with the persisted overrides: a value above its cap becomes the cap,
// a backend no longer configured is dropped, and the default timeout never
// passes the maximum. notes says what changed, for the log.
func Reclamp(op Config, o Overrides) (Overrides, []string) {
	out := Overrides{Ints: map[string]int64{}}
	var notes []string
	for _, s := range intSettings() {
		v, ok := o.Ints[s.key]
		if !ok {
			continue
		}
		c := min(max(v, s.min), s.get(op))
		if c != v {
			notes = append(notes, fmt.Sprintf("%s %d -> %d (cap %d)", s.key, v, c, s.get(op)))
		}
		out.Ints[s.key] = c
	}
	for k := range o.Ints {
		if !slices.ContainsFunc(intSettings(), func(s intSetting) bool { return s.key == k }) {
			notes = append(notes, fmt.Sprintf("unknown setting %q dropped", k))
		}
	}
	notes = append(notes, reclampArchive(op, o, &out)...)
	out.keepSetters(o)
	if e := Effective(op, out); e.ExecTimeoutMS > e.ExecTimeoutMaxMS {
		out.Ints[SettingExecTimeout] = e.ExecTimeoutMaxMS
		notes = append(notes, fmt.Sprintf("%s lowered to %s %d", SettingExecTimeout, SettingExecTimeoutMax, e.ExecTimeoutMaxMS))
	}
	return out, notes
}

// SettingState is one setting as the API shows it.
type SettingState struct {
	Key    string
	Value  any
	Cap    any
	Source string
	SetBy  string // who set an admin override ("" when unknown or not an override)
}

// SettingStates describes every live setting: its effective value, its cap
// and where the value came from. def is the built-in configuration, to tell
// a flag/env value from a default.
func SettingStates(def, op Config, o Overrides) []SettingState {
	eff := Effective(op, o)
	var out []SettingState
	src := func(admin, fromDef bool) string {
		switch {
		case admin:
			return SourceAdmin
		case fromDef:
			return SourceDefault
		}
		return SourceFlag
	}
	for _, s := range intSettings() {
		_, admin := o.Ints[s.key]
		out = append(out, SettingState{Key: s.key, Value: s.get(eff), Cap: s.get(op), Source: src(admin, s.get(op) == s.get(def))})
	}
	out = append(out, archiveStates(def, op, o, src)...)
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	for i := range out {
		out[i].Value = RedactSetting(out[i].Key, out[i].Value)
		if out[i].Source == SourceAdmin {
			out[i].SetBy = o.SetBy[out[i].Key]
		}
	}
	return out
}
