package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// The archive live settings: the backend and its S3 parameters. The
// operator's caps are three lists: the backends an admin may choose
// (--admin-archive-backends; by default the operator's backend and none),
// the S3 endpoints (--s3-endpoint and --admin-s3-endpoint) and the buckets
// (--s3-bucket and --admin-s3-bucket). An endpoint is where every archived
// workspace goes and what the operator's credentials sign for; on a shared
// endpoint (AWS, GCS interop, a hosted MinIO) the bucket is the
// destination just as much, since another party's bucket may accept the
// operator's signature. So an admin can never send archives to a server or
// a bucket the operator did not name. Region, prefix and addressing are the
// admin's, checked as strictly as the flags. Credentials are not a setting:
// they come from the operator's file or environment, never from a request.

// Keys of the S3 live settings.
const (
	SettingS3Endpoint  = "archive_s3_endpoint"
	SettingS3Bucket    = "archive_s3_bucket"
	SettingS3Region    = "archive_s3_region"
	SettingS3Prefix    = "archive_s3_prefix"
	SettingS3PathStyle = "archive_s3_path_style"
	// SettingS3Credentials is shown (set or unset), never settable.
	SettingS3Credentials = "archive_s3_credentials"
)

// s3Setting is one S3 parameter: kept as text in Overrides.S3.
type s3Setting struct {
	key, flag string
	isBool    bool
	check     func(op Config, v string) error
	get       func(Config) string
	set       func(*Config, string)
}

func s3Settings() []s3Setting {
	return []s3Setting{
		{SettingS3Endpoint, "s3-endpoint", false, checkEndpointAllowed,
			func(c Config) string { return c.S3Endpoint }, func(c *Config, v string) { c.S3Endpoint = v }},
		{SettingS3Bucket, "s3-bucket", false, checkBucketAllowed,
			func(c Config) string { return c.S3Bucket }, func(c *Config, v string) { c.S3Bucket = v }},
		{SettingS3Region, "s3-region", false, func(_ Config, v string) error { return CheckS3Region(v) },
			func(c Config) string { return c.S3Region }, func(c *Config, v string) { c.S3Region = v }},
		{SettingS3Prefix, "s3-prefix", false, func(_ Config, v string) error { return CheckS3Prefix(v) },
			func(c Config) string { return c.S3Prefix }, func(c *Config, v string) { c.S3Prefix = v }},
		{SettingS3PathStyle, "s3-path-style", true, func(_ Config, v string) error { _, err := strconv.ParseBool(v); return err },
			func(c Config) string { return strconv.FormatBool(c.S3PathStyle) }, func(c *Config, v string) { c.S3PathStyle, _ = strconv.ParseBool(v) }},
	}
}

// archiveBackends are the backends an admin may choose (the cap of
// archive_backend).
func archiveBackends(op Config) []string {
	if len(op.AdminArchiveBackends) > 0 {
		return op.AdminArchiveBackends
	}
	if op.ArchiveBackend == "none" {
		return []string{"none"}
	}
	return []string{op.ArchiveBackend, "none"}
}

// s3Endpoints are the endpoints an admin may choose (the cap of
// archive_s3_endpoint).
func s3Endpoints(op Config) []string { return operatorList(op.S3Endpoint, op.AdminS3Endpoints) }

// operatorList is the operator's own value (if set) and the admin list,
// without repeats: what an admin may choose.
func operatorList(own string, admin []string) []string {
	var out []string
	if own != "" {
		out = append(out, own)
	}
	for _, v := range admin {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

func checkEndpointAllowed(op Config, v string) error {
	if err := CheckS3Endpoint(v); err != nil {
		return err
	}
	return checkListed(v, s3Endpoints(op), "endpoint", "--s3-endpoint, --admin-s3-endpoint")
}

// checkListed refuses v unless the operator listed it (flags names the
// flags that list what).
func checkListed(v string, allowed []string, what, flags string) error {
	if slices.Contains(allowed, v) {
		return nil
	}
	if len(allowed) == 0 {
		return fmt.Errorf("%q is not allowed: the operator allows no S3 %s (%s)", v, what, flags)
	}
	return fmt.Errorf("%q is not one of the operator's %ss %s (%s)", v, what, strings.Join(allowed, ", "), flags)
}

// s3Buckets are the buckets an admin may choose (the cap of
// archive_s3_bucket): the operator's --s3-bucket and --admin-s3-bucket.
func s3Buckets(op Config) []string { return operatorList(op.S3Bucket, op.AdminS3Buckets) }

// checkBucketAllowed accepts only a bucket the operator named (even one
// the syntax check would not accept: the operator chose it).
func checkBucketAllowed(op Config, v string) error {
	allowed := s3Buckets(op)
	if !slices.Contains(allowed, v) {
		if err := CheckS3Bucket(v); err != nil {
			return err
		}
	}
	return checkListed(v, allowed, "bucket", "--s3-bucket, --admin-s3-bucket")
}

func isNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

// applyArchive applies one archive key of a patch; handled is false for a
// key that is not an archive setting.
func applyArchive(op Config, next *Overrides, key string, v json.RawMessage) (handled bool, err error) {
	if key == SettingArchiveBackend {
		return true, applyBackend(op, next, v)
	}
	if SecretSetting(key) {
		return true, settingInvalid("%s: credentials are never accepted over the API: the operator sets --s3-credentials-file or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", key)
	}
	for _, s := range s3Settings() {
		if s.key != key {
			continue
		}
		if isNull(v) {
			delete(next.S3, key)
			return true, nil
		}
		var text string
		if s.isBool {
			var b bool
			if err := json.Unmarshal(v, &b); err != nil {
				return true, settingInvalid("%s: want true or false", key)
			}
			text = strconv.FormatBool(b)
		} else if err := json.Unmarshal(v, &text); err != nil {
			return true, settingInvalid("%s: want a string", key)
		}
		if err := s.check(op, text); err != nil {
			return true, settingInvalid("%s: %v", key, err)
		}
		if next.S3 == nil {
			next.S3 = map[string]string{}
		}
		next.S3[key] = text
		return true, nil
	}
	return false, nil
}

func applyBackend(op Config, next *Overrides, v json.RawMessage) error {
	key := SettingArchiveBackend
	if isNull(v) {
		next.ArchiveBackend = ""
		return nil
	}
	var b string
	if err := json.Unmarshal(v, &b); err != nil {
		return settingInvalid("%s: want a string (local, s3 or none)", key)
	}
	allowed := archiveBackends(op)
	if !slices.Contains(allowed, b) {
		if b == "local" || b == "s3" {
			return settingInvalid("%s: %q is not one of %s: the operator lists the backends an admin may choose with --admin-archive-backends", key, b, strings.Join(allowed, ", "))
		}
		return settingInvalid("%s: %q is not one of %s", key, b, strings.Join(allowed, ", "))
	}
	next.ArchiveBackend = b
	return nil
}

// checkArchive refuses an S3 backend without a usable endpoint and bucket.
func checkArchive(op, c Config) error {
	if c.ArchiveBackend != "s3" {
		return nil
	}
	if err := checkEndpointAllowed(op, c.S3Endpoint); err != nil {
		return settingInvalid("%s s3 needs %s: %v", SettingArchiveBackend, SettingS3Endpoint, err)
	}
	if c.S3Bucket == "" {
		return settingInvalid("%s s3 needs %s: the operator set no --s3-bucket", SettingArchiveBackend, SettingS3Bucket)
	}
	if err := checkBucketAllowed(op, c.S3Bucket); err != nil {
		return settingInvalid("%s s3 needs %s: %v", SettingArchiveBackend, SettingS3Bucket, err)
	}
	return nil
}

// effectiveArchive applies the archive overrides to c (op's copy).
func effectiveArchive(op Config, o Overrides, c *Config) {
	for _, s := range s3Settings() {
		if v, ok := o.S3[s.key]; ok && s.check(op, v) == nil {
			s.set(c, v)
		}
	}
	if o.ArchiveBackend != "" && slices.Contains(archiveBackends(op), o.ArchiveBackend) {
		c.ArchiveBackend = o.ArchiveBackend
	}
}

// reclampArchive keeps the archive overrides op still allows.
func reclampArchive(op Config, o Overrides, out *Overrides) []string {
	var notes []string
	for k, v := range o.S3 {
		i := slices.IndexFunc(s3Settings(), func(s s3Setting) bool { return s.key == k })
		if i < 0 {
			notes = append(notes, fmt.Sprintf("unknown setting %q dropped", k))
			continue
		}
		if err := s3Settings()[i].check(op, v); err != nil {
			notes = append(notes, fmt.Sprintf("%s %q dropped: %v", k, v, err))
			continue
		}
		if out.S3 == nil {
			out.S3 = map[string]string{}
		}
		out.S3[k] = v
	}
	if o.ArchiveBackend != "" {
		if slices.Contains(archiveBackends(op), o.ArchiveBackend) {
			out.ArchiveBackend = o.ArchiveBackend
		} else {
			notes = append(notes, fmt.Sprintf("%s %q dropped: not allowed by the operator", SettingArchiveBackend, o.ArchiveBackend))
		}
	}
	if err := checkArchive(op, Effective(op, *out)); err != nil && out.ArchiveBackend != "" {
		notes = append(notes, fmt.Sprintf("%s %q dropped: %v", SettingArchiveBackend, out.ArchiveBackend, err))
		out.ArchiveBackend = ""
	}
	return notes
}

// archiveStates are the archive rows of SettingStates.
func archiveStates(def, op Config, o Overrides, src func(admin, fromDef bool) string) []SettingState {
	eff := Effective(op, o)
	out := []SettingState{{Key: SettingArchiveBackend, Value: eff.ArchiveBackend, Cap: strings.Join(archiveBackends(op), "|"),
		Source: src(o.ArchiveBackend != "", op.ArchiveBackend == def.ArchiveBackend)}}
	for _, s := range s3Settings() {
		_, admin := o.S3[s.key]
		var val, limit any = s.get(eff), "any"
		switch s.key {
		case SettingS3Endpoint:
			limit = strings.Join(s3Endpoints(op), "|")
		case SettingS3Bucket:
			limit = strings.Join(s3Buckets(op), "|")
		case SettingS3PathStyle:
			val, limit = eff.S3PathStyle, "true|false"
		}
		out = append(out, SettingState{Key: s.key, Value: val, Cap: limit, Source: src(admin, s.get(op) == s.get(def))})
	}
	return out
}

// ArchiveParams is the part of a configuration that decides which archive
// store is open: when it changes, the store is opened again.
type ArchiveParams struct {
	Backend, Endpoint, Bucket, Region, Prefix string
	PathStyle                                 bool
}

// ArchiveParamsOf returns c's archive parameters (the S3 ones only for s3).
func ArchiveParamsOf(c Config) ArchiveParams {
	p := ArchiveParams{Backend: c.ArchiveBackend}
	if c.ArchiveBackend == "s3" {
		p.Endpoint, p.Bucket, p.Region, p.Prefix, p.PathStyle = c.S3Endpoint, c.S3Bucket, c.S3Region, c.S3Prefix, c.S3PathStyle
	}
	return p
}
