package policy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Setters of live settings. Every override remembers the caller identity
// that set it, so that when that caller stops being an admin (its API key
// is removed from the keys file, or loses "admin", and the file is
// reloaded) the supervisor can audit what it left behind and reset the
// settings that decide where archives go. The integer settings are kept:
// an admin can only tighten them under the operator's flags, so resetting
// one would loosen a limit on nobody's authority.

// RevokedSetting is one override whose setter is no longer an admin.
type RevokedSetting struct {
	Key   string
	Value string // the override's value as text, redacted by RedactSetting
	SetBy string // the caller identity that set it
	// Reset: the setting decides where archives go (ArchiveSetting), so
	// it fell back to the operator's value.
	Reset bool
}

// ArchiveSetting reports whether key decides where archived workspaces go
// (the backend and every S3 parameter): such a setting does not outlive the
// authority of the admin who set it.
func ArchiveSetting(key string) bool {
	return key == SettingArchiveBackend || strings.HasPrefix(key, "archive_s3_")
}

// recordSetter notes who set key (reset: the key went back to the
// operator's value, so it has no setter any more).
func (o *Overrides) recordSetter(key, setBy string, reset bool) {
	if reset || setBy == "" {
		delete(o.SetBy, key)
		return
	}
	if o.SetBy == nil {
		o.SetBy = map[string]string{}
	}
	o.SetBy[key] = setBy
}

// keepSetters copies from's setters of the keys o still overrides.
func (o *Overrides) keepSetters(from Overrides) {
	for k, who := range from.SetBy {
		if _, ok := o.value(k); ok {
			o.recordSetter(k, who, false)
		}
	}
}

// value is the override of key as text, and whether there is one.
func (o Overrides) value(key string) (string, bool) {
	if key == SettingArchiveBackend {
		return o.ArchiveBackend, o.ArchiveBackend != ""
	}
	if v, ok := o.S3[key]; ok {
		return v, true
	}
	if v, ok := o.Ints[key]; ok {
		return strconv.FormatInt(v, 10), true
	}
	return "", false
}

// Revoked lists, sorted by key, the overrides whose recorded setter
// isAdmin no longer accepts, and returns o with the archive ones among them
// reset to the operator's values and re-clamped against op (an S3 backend
// left without a usable endpoint or bucket falls back to the operator's
// backend: fail closed, never to a destination nobody chose). Overrides
// without a recorded setter are not judged.
func Revoked(op Config, o Overrides, isAdmin func(setBy string) bool) ([]RevokedSetting, Overrides) {
	var out []RevokedSetting
	next := o.Clone()
	reset := false
	for key, who := range o.SetBy {
		v, ok := o.value(key)
		if !ok || isAdmin(who) {
			continue
		}
		r := RevokedSetting{Key: key, Value: fmt.Sprint(RedactSetting(key, v)), SetBy: who, Reset: ArchiveSetting(key)}
		if r.Reset {
			reset = true
			next.unset(key)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	if reset {
		next, _ = Reclamp(op, next)
	}
	return out, next
}

// unset removes the override of key and its setter.
func (o *Overrides) unset(key string) {
	if key == SettingArchiveBackend {
		o.ArchiveBackend = ""
	}
	delete(o.S3, key)
	delete(o.Ints, key)
	delete(o.SetBy, key)
}
