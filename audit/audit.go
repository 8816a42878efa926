// Package audit owns the launch audit trail: the record schema, the
// hash-chained JSON-lines writer the supervisor appends to, its rotation and
// syslog forwarding, and the verifier behind `sandboxctl audit verify`.
//
// One record is written per step of the launch sequence, each carrying the
// exec id and the caller's uid so an auditor can reconstruct a launch from
// accept to reap; the facts of each step are a typed struct of package
// audit/facts. Every record also carries its sequence number,
// the hash of the record before it and its own hash, so a removed, edited,
// reordered or truncated record is detected (SCHEMA.md says exactly how).
//
// It must never drop a record silently: a failed write is returned to the
// caller, which refuses or fails the launch rather than run unaudited, and a
// writer that failed once refuses every later record rather than leave a gap.
package audit

//go:generate go run ./internal/schemadoc -file SCHEMA.md

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/audit/facts"
)

// SchemaVersion is bumped whenever a field changes meaning. Version 2 added
// the hash chain (seq, prev_hash, hash) and the log records (header, start,
// stop, rotate, interrupted). SCHEMA.md documents every version.
const SchemaVersion = 2

// Steps of the launch sequence, in order (their facts: package audit/facts).
// Helper steps (enter … exec) are reported by sandboxd-nsinit over its
// report fd and relayed by the supervisor.
const (
	StepAccept    = facts.StepAccept
	StepDecide    = facts.StepDecide
	StepPrepare   = facts.StepPrepare
	StepEnter     = facts.StepEnter
	StepNetwork   = facts.StepNetwork
	StepSeccomp   = facts.StepSeccomp
	StepDrop      = facts.StepDrop
	StepExec      = facts.StepExec
	StepReap      = facts.StepReap
	StepArtifacts = facts.StepArtifacts
	StepEgress    = facts.StepEgress
)

// Records about the log itself and about execs the launch sequence did not
// finish. They are written by the writer, never by the launch path.
const (
	// StepHeader is the first record of every file: which chain it belongs
	// to and what it continues from.
	StepHeader = "header"
	// StepStart is written each time a supervisor opens the log.
	StepStart = "start"
	// StepStop is written when a supervisor closes the log cleanly.
	StepStop = "stop"
	// StepRotate is the last record of a file that was rotated away.
	StepRotate = "rotate"
	// StepPrune names the rotated files audit retention is about to delete
	// (facts.deleted); it is durable before they go, so verify can tell a
	// pruned predecessor from a removed one.
	StepPrune = "prune"
	// StepInterrupted closes an exec whose supervisor stopped before the
	// exec was reaped (found when the next supervisor opens the log).
	StepInterrupted = facts.StepInterrupted
	// StepKernelExec links a kernel exec to its kernel's launch id.
	StepKernelExec = facts.StepKernelExec
	// StepWarmExec links a one-shot exec to the warm sandbox that ran it.
	StepWarmExec = facts.StepWarmExec
)

// Sources of records.
const (
	SourceSupervisor = "supervisor"
	SourceNsinit     = "nsinit"
)

// ZeroHash is the prev_hash of the first record of a new chain.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Record is one line of the audit log. The field order is the order on the
// line; hash is always last (see SCHEMA.md, "Hash chain").
type Record struct {
	V         int       `json:"v"`
	Seq       uint64    `json:"seq"`
	PrevHash  string    `json:"prev_hash"`
	Time      time.Time `json:"time"`
	ExecID    string    `json:"exec_id"`
	Step      string    `json:"step"`
	Source    string    `json:"source"` // "supervisor" or "nsinit"
	CallerUID int       `json:"caller_uid"`
	CallerGID int       `json:"caller_gid"`
	CallerPID int       `json:"caller_pid"`
	// Caller is the caller's identity: "uid:<n>" for a Unix-socket peer,
	// "key:<name>" for an API key over TCP (whose uid, gid and pid are -1).
	// Empty on records not made for a request.
	Caller string `json:"caller,omitempty"`
	OK     bool   `json:"ok"`
	Error  string `json:"error,omitempty"`
	// Facts are the step's facts. Written: a value of the step's type in
	// package audit/facts (a relayed helper report: its json.RawMessage; the
	// session, file and log records: a map). Read back by Verify and
	// ReadRecords: the json.RawMessage of the line; DecodeFacts types it.
	Facts any `json:"facts,omitempty"`
	// Hash is the SHA-256 of the line without this field; set by the writer.
	Hash string `json:"hash,omitempty"`
}

// DecodeFacts returns r's facts as the typed value of its step, decoded
// strictly (facts.Decode): a fact the step does not define, or one an ok
// record of the step requires and lacks, is an error. Steps without typed
// facts give facts.ErrUntyped.
func (r Record) DecodeFacts() (facts.Facts, error) {
	raw, err := r.RawFacts()
	if err != nil {
		return nil, err
	}
	return facts.Decode(r.Step, r.OK, raw)
}

// RawFacts returns r's facts as JSON (nil when there are none).
func (r Record) RawFacts() (json.RawMessage, error) {
	switch f := r.Facts.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		return f, nil
	}
	b, err := json.Marshal(r.Facts)
	if err != nil {
		return nil, fmt.Errorf("%s facts: %w", r.Step, err)
	}
	return b, nil
}

// FactMap returns r's facts as a generic JSON object (for the untyped log
// records and for tests); nil when there are none or they are not an object.
func (r Record) FactMap() map[string]any {
	if m, ok := r.Facts.(map[string]any); ok {
		return m
	}
	raw, err := r.RawFacts()
	if err != nil || len(raw) == 0 {
		return nil
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

// Sink receives audit records. Implementations must be safe for concurrent use.
type Sink interface {
	Write(r Record) error
}

// Syncer is a Sink with a barrier: Sync returns once every record written
// before it is durable. FileWriter is one.
type Syncer interface {
	Sync() error
}

// Sync is the barrier on sink: its Sync when it has one; a sink without
// one makes each record durable in Write (or keeps it in memory), so there
// is nothing to wait for.
func Sync(sink Sink) error {
	if s, ok := sink.(Syncer); ok {
		return s.Sync()
	}
	return nil
}

// Deferred reports whether r may be made durable at the next barrier
// rather than in Write: a successful step of a launch story before its
// end. Each such record is followed, before anything runs or any answer
// is given, by a barrier: the launcher's Sync before it releases the
// helper (accept, decide, prepare), a synced terminal record (the reap),
// or the supervisor's Sync before a refusal. A crash between barriers can
// lose only these records of an exec that no answer has referred to yet.
// Refusals, failures, terminal records and everything outside a launch
// story are durable when Write returns.
func Deferred(r Record) bool {
	if !r.OK || Terminal(r) {
		return false
	}
	switch r.Step {
	case StepAccept, StepDecide, StepPrepare:
		return true
	}
	return r.Source == SourceNsinit
}

// Terminal reports whether r ends its exec's launch story: the reap, an
// interrupted record, or a refusal or failure before the helper was started
// (accept, decide or prepare not ok). An exec whose last record is not
// terminal is still running, or its supervisor died.
func Terminal(r Record) bool {
	switch r.Step {
	case StepReap, StepInterrupted:
		return true
	case StepAccept, StepDecide, StepPrepare:
		return !r.OK
	}
	return false
}

// OpensTrail reports whether r, the first record seen of its exec id,
// begins a trail that must end in a terminal record: an accept, or the
// prepare of a launch without an accept of its own (a session kernel's
// long-lived sandbox, whose exec id is its kernel id). A kernel that dies
// with its supervisor is then closed by the next one like an exec.
func OpensTrail(r Record) bool {
	return r.Step == StepAccept || r.Step == StepPrepare && r.OK
}

// IsLogRecord reports whether step is one of the records about the log
// itself rather than an exec.
func IsLogRecord(step string) bool {
	switch step {
	case StepHeader, StepStart, StepStop, StepRotate, StepPrune:
		return true
	}
	return false
}

// Memory keeps records in memory; for tests.
type Memory struct {
	mu      sync.Mutex
	Records []Record
}

// Write stores r.
func (m *Memory) Write(r Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.V = SchemaVersion
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	m.Records = append(m.Records, r)
	return nil
}

// ForExec returns the records of one exec, in order.
func (m *Memory) ForExec(id string) []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, r := range m.Records {
		if r.ExecID == id {
			out = append(out, r)
		}
	}
	return out
}
