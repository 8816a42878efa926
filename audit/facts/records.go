package facts

import "time"

// The records that are not an exec's launch: sessions, their archives, the
// workspace's file API, live settings and the keys file. The supervisor
// (and package session) write them; their facts are typed like the launch
// steps', so a renamed fact is a compile error and `audit verify` decodes
// them strictly. Every name below is the one these records carried when
// they were maps, so logs written before they were typed still verify.

// Steps of the session, file, settings and keys records.
const (
	StepSessionCreate         = "session.create"
	StepSessionRestore        = "session.restore"
	StepSessionArchive        = "session.archive"
	StepSessionDelete         = "session.delete"
	StepSessionArchiveRemoved = "session.archive_removed"
	// StepArchiveExpire is an archive removed by retention: written under
	// an id of its own, with the supervisor as the caller (nobody asked).
	StepArchiveExpire  = "archive.expire"
	StepFilePut        = "file.put"
	StepFileGet        = "file.get"
	StepFileDelete     = "file.delete"
	StepSettingsChange = "settings.change"
	StepKeysReload     = "keys.reload"
)

// Coded is the facts of a step a request can be refused at: the refusal's
// API error code is one of its facts (the record's error has the message).
type Coded interface {
	Facts
	SetCode(code string)
}

// Refusal is the code fact of a record whose step a request can be refused
// at, embedded last in its facts.
type Refusal struct {
	Code string `json:"code,omitzero" doc:"on refusal: the API error code; error has the message"`
}

// SetCode implements Coded.
func (r *Refusal) SetCode(code string) { r.Code = code }

// FileTarget is the file a file record is about.
type FileTarget struct {
	SessionID string `json:"session_id" audit:"always" doc:"the session"`
	Path      string `json:"path" audit:"always" doc:"the path as the request named it"`
}

// SessionCreate is the facts of a session.create record.
type SessionCreate struct {
	SessionID  string `json:"session_id" audit:"always" doc:"the session's id (also the record's exec_id)"`
	TTLSeconds int64  `json:"ttl_seconds" audit:"always" doc:"the idle TTL the session got (the request's, clamped to the operator's cap)"`
	KeySHA256  string `json:"key_sha256" audit:"always" doc:"SHA-256 of the session's archive key; empty: no key, or archives are off"`
	Workspace  string `json:"workspace" audit:"always" doc:"the workspace directory on the host"`
	Restored   bool   `json:"restored" audit:"always" doc:"the workspace was filled from the key's archive (the session.restore record before this one)"`
}

// Step implements Facts.
func (*SessionCreate) Step() string { return StepSessionCreate }

// Sentences implements Facts.
func (*SessionCreate) Sentences() []Sentence {
	return []Sentence{
		{Text: "Session {session_id} was created for {caller} with an idle TTL of {ttl_seconds} s; its workspace is {workspace}."},
		{Text: "Archive key SHA-256 {key_sha256}; restored from its archive: {restored}."},
	}
}

// ArchiveObject names one archive in a backend. Archive is the backend's
// relative name (u<uid>/<sha256>.tar), never a credential or an endpoint.
type ArchiveObject struct {
	Archive string `json:"archive" audit:"always" doc:"the archive's name in its backend (u<uid>/<sha256 of the key>.tar); never a credential or endpoint"`
	Backend string `json:"backend" audit:"always" doc:"where archives are kept: dir or s3"`
}

// SessionRestore is the facts of a session.restore record: a new session's
// workspace was (or failed to be) filled from its key's archive. A failed
// restore leaves the workspace empty and does not fail the request.
type SessionRestore struct {
	SessionID string `json:"session_id" audit:"always" doc:"the session restored into"`
	ArchiveObject
	Bytes  *int64 `json:"bytes,omitempty" doc:"the archive's recorded size (absent: it could not be read)"`
	SHA256 string `json:"sha256,omitzero" doc:"the archive's recorded SHA-256, verified before a byte was written"`
}

// Step implements Facts.
func (*SessionRestore) Step() string { return StepSessionRestore }

// Sentences implements Facts.
func (*SessionRestore) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "Session {session_id}'s workspace was restored from {archive} ({backend}), {bytes} bytes, SHA-256 {sha256}."},
		{When: OnlyFailed, Text: "Session {session_id}'s workspace could not be restored from {archive} ({backend}; {bytes} bytes, SHA-256 {sha256}); it starts empty."},
	}
}

// SessionArchive is the facts of a session.archive record: a deleted
// session's workspace was (or failed to be) stored under its key. A failed
// archive does not fail the delete.
type SessionArchive struct {
	SessionID string `json:"session_id" audit:"always" doc:"the session archived"`
	ArchiveObject
	Bytes    *int64 `json:"bytes,omitempty" doc:"the archive's size as stored"`
	SHA256   string `json:"sha256,omitzero" doc:"the archive's SHA-256 as stored"`
	MaxBytes *int64 `json:"max_bytes,omitempty" doc:"on failure: the largest archive the operator allows (--archive-max-bytes)"`
}

// Step implements Facts.
func (*SessionArchive) Step() string { return StepSessionArchive }

// Sentences implements Facts.
func (*SessionArchive) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "Session {session_id}'s workspace was archived as {archive} ({backend}), {bytes} bytes, SHA-256 {sha256}."},
		{When: OnlyFailed, Text: "Session {session_id}'s workspace was not archived as {archive} ({backend}; the limit is {max_bytes} bytes); the delete went on."},
	}
}

// SessionDelete is the facts of a session.delete record.
type SessionDelete struct {
	SessionID    string `json:"session_id" audit:"always" doc:"the session deleted"`
	Why          string `json:"why" audit:"always" doc:"delete (DELETE /v1/sessions/{id}) or ttl (its idle TTL passed)"`
	ArchiveBytes *int64 `json:"archive_bytes,omitempty" doc:"the bytes archived under the session's key (the session.archive record before this one)"`
}

// Step implements Facts.
func (*SessionDelete) Step() string { return StepSessionDelete }

// Sentences implements Facts.
func (*SessionDelete) Sentences() []Sentence {
	return []Sentence{
		{Text: "Session {session_id} was deleted ({why}); archived bytes: {archive_bytes|or:none}."},
	}
}

// SessionArchiveRemoved is the facts of a session.archive_removed record:
// an older archive of the same owner was removed to keep the owner within
// its archive budget.
type SessionArchiveRemoved struct {
	SessionID string `json:"session_id" audit:"always" doc:"the session whose archive made room"`
	ArchiveObject
	Bytes          int64  `json:"bytes" audit:"always" doc:"the removed archive's size"`
	Why            string `json:"why" audit:"always" doc:"caller_budget: the owner's archives were over --archive-caller-max-bytes"`
	Owner          string `json:"owner" audit:"always" doc:"the archives' owner (uid:N or key:NAME)"`
	OwnerUID       int    `json:"owner_uid" audit:"always" doc:"the owner's uid"`
	CallerMaxBytes int64  `json:"caller_max_bytes" audit:"always" doc:"the owner's archive budget"`
}

// Step implements Facts.
func (*SessionArchiveRemoved) Step() string { return StepSessionArchiveRemoved }

// Sentences implements Facts.
func (*SessionArchiveRemoved) Sentences() []Sentence {
	return []Sentence{
		{Text: "Archive {archive} ({backend}, {bytes} bytes) of {owner} (uid {owner_uid}) was removed ({why}: the budget is {caller_max_bytes} bytes) to make room for session {session_id}'s."},
	}
}

// ArchiveExpire is the facts of an archive.expire record.
type ArchiveExpire struct {
	ArchiveObject
	Bytes            int64     `json:"bytes" audit:"always" doc:"the removed archive's size"`
	LastUsed         time.Time `json:"last_used" audit:"always" doc:"its last write or restore"`
	RetentionSeconds int64     `json:"retention_seconds" audit:"always" doc:"the operator's --archive-retention"`
}

// Step implements Facts.
func (*ArchiveExpire) Step() string { return StepArchiveExpire }

// Sentences implements Facts.
func (*ArchiveExpire) Sentences() []Sentence {
	return []Sentence{
		{Text: "Archive {archive} ({backend}, {bytes} bytes), last used {last_used}, was removed: retention is {retention_seconds} s."},
	}
}

// FilePut is the facts of a file.put record (PUT /v1/sessions/{id}/files/{path}).
type FilePut struct {
	FileTarget
	Size   *int64 `json:"size,omitempty" audit:"required" doc:"bytes written"`
	SHA256 string `json:"sha256,omitzero" audit:"required" doc:"SHA-256 of the bytes written"`
	Refusal
}

// Step implements Facts.
func (*FilePut) Step() string { return StepFilePut }

// Sentences implements Facts.
func (*FilePut) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "{caller} wrote {path|q} in session {session_id}'s workspace: {size} bytes, SHA-256 {sha256}."},
		{When: OnlyFailed, Text: "{caller}'s write of {path|q} in session {session_id}'s workspace was refused ({code})."},
	}
}

// FileGet is the facts of a file.get record (GET /v1/sessions/{id}/files/{path}).
type FileGet struct {
	FileTarget
	Size *int64 `json:"size,omitempty" audit:"required" doc:"bytes sent (the size fstat gave when the file was opened)"`
	Refusal
}

// Step implements Facts.
func (*FileGet) Step() string { return StepFileGet }

// Sentences implements Facts.
func (*FileGet) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "{caller} read {path|q} from session {session_id}'s workspace: {size} bytes."},
		{When: OnlyFailed, Text: "{caller}'s read of {path|q} from session {session_id}'s workspace was refused ({code})."},
	}
}

// FileDelete is the facts of a file.delete record (DELETE /v1/sessions/{id}/files/{path}).
type FileDelete struct {
	FileTarget
	Refusal
}

// Step implements Facts.
func (*FileDelete) Step() string { return StepFileDelete }

// Sentences implements Facts.
func (*FileDelete) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "{caller} deleted {path|q} from session {session_id}'s workspace."},
		{When: OnlyFailed, Text: "{caller}'s delete of {path|q} from session {session_id}'s workspace was refused ({code})."},
	}
}

// SettingChange is one live setting's change: its effective value and
// where it came from, before and after. A secret shows only set or unset.
// The members are in the order the untyped records had (sorted).
type SettingChange struct {
	New    any    `json:"new"`
	Old    any    `json:"old"`
	Source string `json:"source"`
}

// SettingsChange is the facts of a settings.change record (PATCH
// /v1/admin/settings, or a caller refused at an admin route).
type SettingsChange struct {
	Changes map[string]SettingChange `json:"changes,omitempty" audit:"required" doc:"each setting whose effective value or source changed, by key: old, new, source (default, flag/env or admin)"`
	Method  string                   `json:"method,omitzero" doc:"a caller refused at an admin route: the request's method"`
	Path    string                   `json:"path,omitzero" doc:"a caller refused at an admin route: the request's path"`
	Refusal
}

// Step implements Facts.
func (*SettingsChange) Step() string { return StepSettingsChange }

// Sentences implements Facts.
func (*SettingsChange) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "{caller} changed the live settings: {changes}."},
		{When: OnlyFailed, Text: "{caller}'s settings change was refused ({code}); it would have changed {changes}."},
		{When: OnlyFailed, Text: "{caller} is not an admin: {method} {path} was refused."},
	}
}

// KeysReload is the facts of a keys.reload record (SIGHUP re-read the API
// keys file). A failed reload keeps the keys in force.
type KeysReload struct {
	File    string   `json:"file" audit:"always" doc:"the keys file"`
	Trigger string   `json:"trigger" audit:"always" doc:"SIGHUP"`
	Names   []string `json:"names,omitempty" doc:"the key names in force after the reload (never a key)"`
}

// Step implements Facts.
func (*KeysReload) Step() string { return StepKeysReload }

// Sentences implements Facts.
func (*KeysReload) Sentences() []Sentence {
	return []Sentence{
		{When: OnlyOK, Text: "The keys file {file} was reloaded ({trigger}); the keys in force: {names|or:none}."},
		{When: OnlyFailed, Text: "The keys file {file} was not reloaded ({trigger}); the keys loaded before stay in force."},
	}
}
