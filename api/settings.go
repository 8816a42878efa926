package api

// AdminSettingsPath is the live-settings resource (GET, PATCH), for admin
// callers only: root, the supervisor's own uid, --admin-uid and API keys
// marked admin in the keys file.
const AdminSettingsPath = "/v1/admin/settings"

// Setting is one live setting: its effective value, its cap (the operator's
// flag or SANDBOXD_* variable, which an admin can tighten under but never
// pass; for archive_backend and archive_s3_endpoint, the values that may be
// chosen, "|"-joined; "any" for the other S3 parameters) and where the
// value came from: "default", "flag/env" or "admin". archive_s3_credentials
// is shown, never set: its value is only "set" or "unset".
type Setting struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Cap    any    `json:"cap"`
	Source string `json:"source"`
	// SetBy is who set an admin override (key:NAME or uid:N); absent for
	// a value that is not an override, or one persisted without a setter.
	SetBy string `json:"set_by,omitempty"`
}

// Settings is the answer of GET and PATCH /v1/admin/settings. A PATCH body
// is a JSON object of key to new value (null resets a key to the
// operator's value); unknown keys and values above their cap are 400.
type Settings struct {
	Settings []Setting `json:"settings"`
}

// SettingsPatch documents the body of PATCH /v1/admin/settings: the keys an
// admin may set. The supervisor decodes the body as a JSON object of key to
// value so that null can reset a key to the operator's value. S3
// credentials are deliberately absent (only the operator's file or
// environment supplies them), and an S3 endpoint must be one the operator
// listed.
type SettingsPatch struct {
	ExecTimeoutMS      *int64  `json:"exec_timeout_ms,omitempty"`
	ExecTimeoutMaxMS   *int64  `json:"exec_timeout_max_ms,omitempty"`
	IdleTTLSeconds     *int64  `json:"idle_ttl_seconds,omitempty"`
	MaxSessions        *int64  `json:"max_sessions,omitempty"`
	MaxConcurrentExecs *int64  `json:"max_concurrent_execs,omitempty"`
	ArchiveBackend     *string `json:"archive_backend,omitempty"`
	S3Endpoint         *string `json:"archive_s3_endpoint,omitempty"`
	S3Bucket           *string `json:"archive_s3_bucket,omitempty"`
	S3Region           *string `json:"archive_s3_region,omitempty"`
	S3Prefix           *string `json:"archive_s3_prefix,omitempty"`
	S3PathStyle        *bool   `json:"archive_s3_path_style,omitempty"`
}
