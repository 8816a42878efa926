// Package facts owns the typed facts of every launch-step audit record: one
// struct per step, the step names, the strict decoder readers use, and the
// sentence templates `sandboxctl audit show` fills. audit/SCHEMA.md's fact
// tables are generated from these types (audit/internal/schemadoc), so the
// reference cannot drift from what is written.
//
// The helper steps (Enter, Network, Seccomp, Drop, Exec) are written by
// sandboxd-nsinit, the binary that carries file capabilities, so this
// package must never import anything but the standard library: a dependency
// here is a dependency of the privileged helper.
package facts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Steps of the launch sequence, in order. Helper steps (enter … exec) are
// reported by sandboxd-nsinit over its report fd and relayed by the
// supervisor.
const (
	StepAccept    = "accept"
	StepDecide    = "decide"
	StepPrepare   = "prepare"
	StepEnter     = "enter"
	StepNetwork   = "network"
	StepSeccomp   = "seccomp"
	StepDrop      = "drop"
	StepExec      = "exec"
	StepReap      = "reap"
	StepArtifacts = "artifacts"
	// StepEgress is one connection attempt through the egress proxy of an
	// exec with network "egress", written when the connection ends; under
	// a session kernel's launch id for a connection the kernel made between
	// execs.
	StepEgress = "egress"
	// StepInterrupted closes an exec whose supervisor stopped before the
	// exec was reaped (written by the next supervisor at start-up).
	StepInterrupted = "interrupted"
	// StepKernelExec links an exec that runs in a session's kernel to the
	// kernel's launch id (between its decide and its reap).
	StepKernelExec = "kernel_exec"
	// StepWarmExec links a one-shot exec that a warm pool sandbox ran to
	// that sandbox's launch id (between its decide and its reap).
	StepWarmExec = "warm_exec"
)

// HelperSteps are the steps sandboxd-nsinit reports, in the order it must
// report them (nsinit.Main's step loop).
var HelperSteps = []string{StepEnter, StepNetwork, StepSeccomp, StepDrop, StepExec}

// Facts is the facts of one record; Step names the record type it belongs to.
type Facts interface {
	Step() string
	// Sentences are the templates `sandboxctl audit show` fills (Describe).
	Sentences() []Sentence
}

// Helper is the facts of a step sandboxd-nsinit reports. Every helper
// report carries t_us.
type Helper interface {
	Facts
	// Stamp records how far into the helper's life the report was written.
	Stamp(tUS int64)
}

// Timing is embedded in every helper step's facts.
type Timing struct {
	TUS int64 `json:"t_us,omitzero" doc:"microseconds since the prelude started (CLOCK_MONOTONIC) when the helper wrote the report"`
}

// Stamp sets t_us.
func (t *Timing) Stamp(tUS int64) { t.TUS = tUS }

// MaxReport bounds one helper report line (the relay's scanner buffer).
const MaxReport = 1 << 20

// New returns a zero value of the facts type of step, or nil when the step
// has no typed facts (the audit writer's own records about the log: header,
// start, stop, rotate, prune).
func New(step string) Facts {
	switch step {
	case StepAccept:
		return &Accept{}
	case StepDecide:
		return &Decide{}
	case StepPrepare:
		return &Prepare{}
	case StepEnter:
		return &Enter{}
	case StepNetwork:
		return &Network{}
	case StepSeccomp:
		return &Seccomp{}
	case StepDrop:
		return &Drop{}
	case StepExec:
		return &Exec{}
	case StepReap:
		return &Reap{}
	case StepArtifacts:
		return &Artifacts{}
	case StepInterrupted:
		return &Interrupted{}
	case StepKernelExec:
		return &KernelExec{}
	case StepWarmExec:
		return &WarmExec{}
	case StepEgress:
		return &Egress{}
	case StepEnvBuild:
		return &EnvBuild{}
	case StepSettingsSetterRevoked:
		return &SettingsSetterRevoked{}
	case StepSessionCreate:
		return &SessionCreate{}
	case StepSessionRestore:
		return &SessionRestore{}
	case StepSessionArchive:
		return &SessionArchive{}
	case StepSessionDelete:
		return &SessionDelete{}
	case StepSessionArchiveRemoved:
		return &SessionArchiveRemoved{}
	case StepArchiveExpire:
		return &ArchiveExpire{}
	case StepFilePut:
		return &FilePut{}
	case StepFileGet:
		return &FileGet{}
	case StepFileDelete:
		return &FileDelete{}
	case StepSettingsChange:
		return &SettingsChange{}
	case StepKeysReload:
		return &KeysReload{}
	}
	return nil
}

// All returns one zero value of every typed step, in launch order (for the
// schema generator and tests).
func All() []Facts {
	steps := []string{StepAccept, StepDecide, StepPrepare, StepEnter, StepNetwork, StepSeccomp, StepDrop, StepExec, StepEgress, StepReap, StepArtifacts, StepInterrupted, StepKernelExec, StepEnvBuild, StepWarmExec,
		StepSessionCreate, StepSessionRestore, StepSessionArchive, StepSessionDelete, StepSessionArchiveRemoved, StepArchiveExpire,
		StepFilePut, StepFileGet, StepFileDelete, StepSettingsChange, StepSettingsSetterRevoked, StepKeysReload}
	out := make([]Facts, len(steps))
	for i, s := range steps {
		out[i] = New(s)
	}
	return out
}

// ErrUntyped is returned by Decode for a step without typed facts.
var ErrUntyped = errors.New("no typed facts for this step")

// Decode decodes the facts of a record of step strictly: a fact the type
// does not define is refused, and so is a record that lacks a fact the type
// requires of it (tag audit:"always": every record; audit:"required": an ok
// record). raw may be empty (no facts).
//
// The object is read once into its members, and each member is decoded into
// its field: one pass over the bytes, which matters to `audit verify` of a
// long log (it decodes every record).
func Decode(step string, ok bool, raw []byte) (Facts, error) {
	f := New(step)
	if f == nil {
		return nil, fmt.Errorf("step %q: %w", step, ErrUntyped)
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		raw = []byte("{}")
	}
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&members); err != nil {
		return nil, fmt.Errorf("%s facts: %w", step, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%s facts: trailing data", step)
	}
	t := reflect.TypeOf(f).Elem()
	index := indexes[t]
	var unknown []string
	v := reflect.ValueOf(f).Elem()
	for name, val := range members {
		path, known := index[name]
		if !known {
			unknown = append(unknown, strconv.Quote(name))
			continue
		}
		if err := json.Unmarshal(val, fieldAt(v, path).Addr().Interface()); err != nil {
			return nil, fmt.Errorf("%s facts: fact %q: %w", step, name, err)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, fmt.Errorf("%s facts: unknown fact %s", step, strings.Join(unknown, ", "))
	}
	var missing []string
	for _, fd := range fields[t] {
		if fd.Presence == Always || fd.Presence == InOK && ok {
			if _, present := members[fd.Name]; !present {
				missing = append(missing, fd.Name)
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s facts: missing %s", step, strings.Join(missing, ", "))
	}
	return f, nil
}

// fieldAt returns the field at path below v, allocating the embedded
// pointers (*Enter in Network, Drop) on the way.
func fieldAt(v reflect.Value, path []int) reflect.Value {
	for i, x := range path {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(reflect.New(v.Type().Elem()))
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v
}

// fields and indexes are computed once from the types (they are constant):
// the documented facts of each type, and where every JSON name it accepts
// lives (embedded structs included, the shallower name winning as in
// encoding/json).
var fields, indexes = func() (map[reflect.Type][]Field, map[reflect.Type]map[string][]int) {
	fs, ix := map[reflect.Type][]Field{}, map[reflect.Type]map[string][]int{}
	for _, f := range All() {
		t := reflect.TypeOf(f).Elem()
		fs[t] = fieldsOf(t)
		ix[t] = map[string][]int{}
		addIndexes(ix[t], t, nil)
	}
	return fs, ix
}()

func addIndexes(m map[string][]int, t reflect.Type, prefix []int) {
	var embedded []reflect.StructField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous {
			embedded = append(embedded, sf)
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			if _, taken := m[name]; !taken {
				m[name] = append(append([]int{}, prefix...), i)
			}
		}
	}
	for _, sf := range embedded {
		et := sf.Type
		if et.Kind() == reflect.Pointer {
			et = et.Elem()
		}
		addIndexes(m, et, append(append([]int{}, prefix...), sf.Index[0]))
	}
}

// Presence says which records of a step must carry a fact.
type Presence string

// Presences, from the tag audit:"always" or audit:"required".
const (
	Optional Presence = "optional"
	InOK     Presence = "ok records" // audit:"required"
	Always   Presence = "always"     // audit:"always"
)

// Field describes one fact of a step, from its struct tags.
type Field struct {
	Name     string   // the JSON name
	Type     string   // a short description of the JSON type
	Doc      string   // what it asserts and how it was observed (tag doc)
	Presence Presence // which records must carry it (tag audit)
	// Absent is how an absent fact reads when it is omitted as zero
	// (omitzero): "no" for a flag, "0" for a count; "" when absence
	// means unknown.
	Absent string
}

// Fields returns the facts of f's type in declaration order, embedded
// structs (Stamp) last.
func Fields(f Facts) []Field {
	return fields[reflect.TypeOf(f).Elem()]
}

func fieldsOf(t reflect.Type) []Field {
	var out, embedded []Field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous {
			// An embedded pointer (*Enter in Network and Drop) is another
			// step's facts carried on a failure, documented there.
			if sf.Type.Kind() != reflect.Pointer {
				embedded = append(embedded, fieldsOf(sf.Type)...)
			}
			continue
		}
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		p := Optional
		switch sf.Tag.Get("audit") {
		case "required":
			p = InOK
		case "always":
			p = Always
		}
		out = append(out, Field{Name: name, Type: jsonType(sf.Type), Doc: sf.Tag.Get("doc"), Presence: p, Absent: absentAs(sf)})
	}
	return append(out, embedded...)
}

// absentAs is what an omitted fact of sf means: omitzero drops a false flag
// and a zero count, so their absence is a value, not an unknown.
func absentAs(sf reflect.StructField) string {
	if !strings.Contains(sf.Tag.Get("json"), ",omitzero") {
		return ""
	}
	switch sf.Type.Kind() {
	case reflect.Bool:
		return "no"
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint32, reflect.Int32:
		return "0"
	}
	return ""
}

func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem()) + " or null"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	case reflect.Int, reflect.Int64, reflect.Uint64, reflect.Uint32, reflect.Int32:
		return "int"
	case reflect.Float64:
		return "number"
	case reflect.Slice:
		return "list of " + jsonType(t.Elem())
	case reflect.Map:
		return "object of " + jsonType(t.Elem())
	case reflect.Struct:
		if t.Name() == "Time" {
			return "RFC 3339 time"
		}
		var names []string
		for _, f := range fieldsOf(t) {
			names = append(names, "`"+f.Name+"`")
		}
		return "object (" + strings.Join(names, ", ") + ")"
	}
	return t.Kind().String()
}

// Names returns the JSON names of f's facts, sorted.
func Names(f Facts) []string {
	var out []string
	for _, fd := range Fields(f) {
		out = append(out, fd.Name)
	}
	sort.Strings(out)
	return out
}
