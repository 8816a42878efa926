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
