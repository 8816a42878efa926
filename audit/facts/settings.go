package facts

// StepSettingsSetterRevoked is the record of a live setting whose setter is
// no longer an admin: written by the supervisor at start and after each
// keys file reload that succeeds, one record per such setting, with no
// caller (nobody asked for it).
const StepSettingsSetterRevoked = "settings.setter_revoked"

// SettingsSetterRevoked is the facts of a settings.setter_revoked record.
type SettingsSetterRevoked struct {
	Setting string `json:"setting" audit:"always" doc:"the live setting's key (docs/API.md, admin settings)"`
	Value   string `json:"value" audit:"always" doc:"the value the setter had set, as text (a secret would show only set or unset)"`
	SetBy   string `json:"set_by" audit:"always" doc:"the caller identity that set it (key:NAME or uid:N), no longer an admin"`
	Reset   bool   `json:"reset,omitzero" doc:"the setting decides where archives go, so it was reset to the operator's value"`
	Trigger string `json:"trigger" audit:"always" doc:"start (the supervisor started) or SIGHUP (the keys file was reloaded)"`
}

// Step implements Facts.
func (*SettingsSetterRevoked) Step() string { return StepSettingsSetterRevoked }

// Sentences implements Facts.
func (*SettingsSetterRevoked) Sentences() []Sentence {
	return []Sentence{
		{Text: "The live setting {setting} = {value} was set by {set_by}, which is no longer an admin (found at {trigger})."},
		{Text: "It was reset to the operator's value: {reset}."},
	}
}
