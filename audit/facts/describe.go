package facts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// When says for which records a sentence is meant.
type When int

// Sentence conditions.
const (
	AnyOutcome When = iota
	OnlyOK          // the step succeeded
	OnlyFailed      // the step failed
)

// Sentence is one sentence `sandboxctl audit show` prints for a record. Text
// names facts in braces: {name} is the fact's value ("-" when absent),
// {a/b} the first of a and b present, and a suffix picks a format:
// |q quoted, |args an argv, |files a list of artifacts, |opt nothing when
// absent, |or:TEXT TEXT when absent, |hide nothing (the fact is implied by
// the sentence). A sentence is printed when its condition holds and, if it names
// facts, at least one of them is present. Names that are not facts
// (caller, outcome) are filled from the extra values given to Describe.
type Sentence struct {
	When When
	Text string
}

// Describe renders the sentences of a record of step with these raw facts.
// Facts the templates do not name are listed ("other facts"), and facts
// that do not decode strictly are reported: the story never hides a fact.
func Describe(step string, ok bool, raw []byte, extra map[string]string) []string {
	m := map[string]any{}
	if len(bytes.TrimSpace(raw)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		_ = dec.Decode(&m)
	}
	used := map[string]bool{}
	var out []string
	f := New(step)
	if f != nil {
		absent := map[string]string{}
		for _, fd := range Fields(f) {
			if fd.Absent != "" {
				absent[fd.Name] = fd.Absent
			}
		}
		for _, s := range f.Sentences() {
			if s.When == OnlyOK && !ok || s.When == OnlyFailed && ok {
				continue
			}
			if line, show := fill(s.Text, m, extra, absent, used); show {
				out = append(out, strings.Split(line, "\n")...)
			}
		}
		if _, err := Decode(step, ok, raw); err != nil {
			out = append(out, "NOT AS THE SCHEMA SAYS: "+err.Error())
		}
	}
	if v, ok := m["t_us"]; ok {
		used["t_us"] = true
		out = append(out, fmt.Sprintf("(reported %s µs into the helper's life)", Format(v)))
	}
	var rest []string
	for k := range m {
		if !used[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for i, k := range rest {
		rest[i] = k + "=" + Format(m[k])
	}
	if len(rest) > 0 {
		out = append(out, "other facts: "+strings.Join(rest, "; "))
	}
	return out
}

// Lenient decodes raw into step's type ignoring facts it does not define,
// for showing what a record says even when it is not as the schema says.
// It returns nil for an untyped step.
func Lenient(step string, raw []byte) Facts {
	f := New(step)
	if f != nil && len(bytes.TrimSpace(raw)) > 0 {
		_ = json.Unmarshal(raw, f)
	}
	return f
}

// fill replaces the placeholders of text; show is false when text names
// facts and none of them is present. A fact omitted as zero reads as its
// zero (absent: "no", "0") but does not count as present.
func fill(text string, m map[string]any, extra, absent map[string]string, used map[string]bool) (string, bool) {
	var b strings.Builder
	named, present := false, false
	for {
		i := strings.IndexByte(text, '{')
		j := strings.IndexByte(text[i+1:], '}')
		if i < 0 || j < 0 {
			b.WriteString(text)
			break
		}
		b.WriteString(text[:i])
		spec := text[i+1 : i+1+j]
		text = text[i+2+j:]
		names, format, _ := strings.Cut(spec, "|")
		val, found := "-", false
		for _, name := range strings.Split(names, "/") {
			if v, ok := extra[name]; ok {
				val, found = v, true
				break
			}
			named = true
			used[name] = true
			if v, ok := m[name]; ok {
				val, found, present = formatAs(v, format), true, true
				break
			}
		}
		if !found && format == "" {
			for _, name := range strings.Split(names, "/") {
				if z, ok := absent[name]; ok {
					val, found = z, true
					break
				}
			}
		}
		switch {
		case format == "hide":
			val = ""
		case !found && format == "opt":
			val = ""
		case !found && strings.HasPrefix(format, "or:"):
			val = format[len("or:"):]
		}
		b.WriteString(val)
	}
	return b.String(), !named || present
}

func formatAs(v any, format string) string {
	switch format {
	case "q":
		return strconv.Quote(Format(v))
	case "args":
		list, _ := v.([]any)
		out := make([]string, 0, len(list))
		for _, a := range list {
			s := Format(a)
			if s == `""` || strings.ContainsAny(s, " \t\"'") {
				s = strconv.Quote(fmt.Sprint(a))
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	case "files":
		list, _ := v.([]any)
		var b strings.Builder
		for _, a := range list {
			if m, ok := a.(map[string]any); ok {
				fmt.Fprintf(&b, "\n  %s, %s bytes, sha256 %s", Format(m["path"]), Format(m["size"]), Format(m["sha256"]))
			}
		}
		return b.String()
	}
	return Format(v)
}

// Format renders a fact value compactly: numbers as written, lists
// comma-separated, booleans yes/no, objects as JSON.
func Format(v any) string {
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		if x == "" {
			return `""`
		}
		return x
	case json.Number:
		return x.String()
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		if x {
			return "yes"
		}
		return "no"
	case []any:
		if len(x) == 0 {
			return "none"
		}
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = Format(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	default:
		b, err := json.Marshal(x)
		if err != nil {
			return fmt.Sprint(x)
		}
		return string(b)
	}
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func derefInt(n *int) string {
	if n == nil {
		return "-"
	}
	return strconv.Itoa(*n)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
