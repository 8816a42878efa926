// Package audit owns the launch audit trail: the record schema and the
// JSON-lines writer the supervisor appends to. One record is written per step
// of the launch sequence (DESIGN.md), each carrying the exec id and the
// caller's uid so an auditor can reconstruct a launch from accept to reap.
//
// It must never drop a record silently: a failed write is returned to the
// caller, which refuses or fails the launch rather than run unaudited.
package audit

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// SchemaVersion is bumped whenever a field changes meaning.
const SchemaVersion = 1

// Steps of the launch sequence, in order. Helper steps (enter … exec) are
// reported by sandboxd-nsinit over its audit fd and relayed by the supervisor.
const (
	StepAccept  = "accept"
	StepDecide  = "decide"
	StepPrepare = "prepare"
	StepEnter   = "enter"
	StepNetwork = "network"
	StepSeccomp = "seccomp"
	StepDrop    = "drop"
	StepExec    = "exec"
	StepReap    = "reap"
)

// Record is one line of the audit log.
type Record struct {
	V         int            `json:"v"`
	Time      time.Time      `json:"time"`
	ExecID    string         `json:"exec_id"`
	Step      string         `json:"step"`
	Source    string         `json:"source"` // "supervisor" or "nsinit"
	CallerUID int            `json:"caller_uid"`
	CallerGID int            `json:"caller_gid"`
	CallerPID int            `json:"caller_pid"`
	OK        bool           `json:"ok"`
	Error     string         `json:"error,omitempty"`
	Facts     map[string]any `json:"facts,omitempty"`
}

// Sink receives audit records. Implementations must be safe for concurrent use.
type Sink interface {
	Write(r Record) error
}

// FileWriter appends records to a file as JSON lines, fsyncing each one so
// that a record the supervisor acted on survives a crash.
type FileWriter struct {
	mu    sync.Mutex
	f     *os.File
	fsync bool
	count uint64
}

// OpenFile opens (creating with mode 0600) the audit log at path for appending.
func OpenFile(path string, fsync bool) (*FileWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open audit log %q: %w", path, err)
	}
	return &FileWriter{f: f, fsync: fsync}, nil
}

// Write appends one record. It stamps the schema version and, when unset, the time.
func (w *FileWriter) Write(r Record) error {
	r.V = SchemaVersion
	if r.Time.IsZero() {
		r.Time = time.Now().UTC()
	}
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode audit record %s/%s: %w", r.ExecID, r.Step, err)
	}
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.f.Write(line); err != nil {
		return fmt.Errorf("write audit record %s/%s: %w", r.ExecID, r.Step, err)
	}
	if w.fsync {
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("sync audit log: %w", err)
		}
	}
	w.count++
	return nil
}

// Count returns how many records this writer has written.
func (w *FileWriter) Count() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// Close closes the log file.
func (w *FileWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.f.Close()
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
