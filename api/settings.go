package api

// AdminSettingsPath is the live-settings resource (GET, PATCH), for admin
// callers only: root, the supervisor's own uid and --admin-uid.
const AdminSettingsPath = "/v1/admin/settings"

// Setting is one live setting: its effective value, its cap (the operator's
// flag or SANDBOXD_* variable, which an admin can tighten under but never
// pass; for archive_backend, the backends that may be chosen, "|"-joined)
// and where the value came from: "default", "flag/env" or "admin".
type Setting struct {
	Key    string `json:"key"`
	Value  any    `json:"value"`
	Cap    any    `json:"cap"`
	Source string `json:"source"`
}

// Settings is the answer of GET and PATCH /v1/admin/settings. A PATCH body
// is a JSON object of key to new value (null resets a key to the
// operator's value); unknown keys and values above their cap are 400.
type Settings struct {
	Settings []Setting `json:"settings"`
}

// SettingsPatch documents the body of PATCH /v1/admin/settings: the keys an
// admin may set. The supervisor decodes the body as a JSON object of key to
// value so that null can reset a key to the operator's value; S3 endpoints
// and credentials are deliberately absent (only the operator sets them).
type SettingsPatch struct {
	ExecTimeoutMS      *int64  `json:"exec_timeout_ms,omitempty"`
	ExecTimeoutMaxMS   *int64  `json:"exec_timeout_max_ms,omitempty"`
	IdleTTLSeconds     *int64  `json:"idle_ttl_seconds,omitempty"`
	MaxSessions        *int64  `json:"max_sessions,omitempty"`
	MaxConcurrentExecs *int64  `json:"max_concurrent_execs,omitempty"`
	ArchiveBackend     *string `json:"archive_backend,omitempty"`
}
