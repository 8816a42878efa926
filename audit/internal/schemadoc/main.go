// Command schemadoc writes the fact tables of audit/SCHEMA.md from the step
// types of package audit/facts: every fact's JSON name, type, which records
// must carry it (every record, ok records, or optional), and what it asserts (the field's doc tag). The prose
// around the tables is kept; each table sits between a pair of markers
//
//	<!-- facts:STEP begin (generated from audit/facts by `go generate ./audit/`; do not edit) -->
//	<!-- facts:STEP end -->
//
// Run it with `go generate ./audit/`. Its test fails when SCHEMA.md differs
// from what it would write, so the reference cannot drift from the types.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/internal/atomicfile"
)

func main() {
	file := flag.String("file", "SCHEMA.md", "the schema document to update in place")
	flag.Parse()
	in, err := os.ReadFile(*file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemadoc:", err)
		os.Exit(1)
	}
	out, err := Generate(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemadoc:", err)
		os.Exit(1)
	}
	if err := atomicfile.WriteFile(*file, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "schemadoc:", err)
		os.Exit(1)
	}
}

func beginMarker(step string) string {
	return "<!-- facts:" + step + " begin (generated from audit/facts by `go generate ./audit/`; do not edit) -->\n"
}

func endMarker(step string) string { return "<!-- facts:" + step + " end -->\n" }

// Generate returns doc with every step's table regenerated. Every typed
// step must have its markers, exactly once.
func Generate(doc []byte) ([]byte, error) {
	for _, f := range facts.All() {
		step := f.Step()
		begin, end := []byte(beginMarker(step)), []byte(endMarker(step))
		if bytes.Count(doc, begin) != 1 || bytes.Count(doc, end) != 1 {
			return nil, fmt.Errorf("step %q: want its begin and end markers exactly once:\n%s%s", step, begin, end)
		}
		i := bytes.Index(doc, begin) + len(begin)
		j := bytes.Index(doc, end)
		if j < i {
			return nil, fmt.Errorf("step %q: end marker before begin marker", step)
		}
		out := append([]byte{}, doc[:i]...)
		out = append(out, Table(f)...)
		doc = append(out, doc[j:]...)
	}
	return doc, nil
}

// Table renders the fact table of one step.
func Table(f facts.Facts) string {
	var b strings.Builder
	b.WriteString("| fact | type | in | meaning, observed how |\n|---|---|---|---|\n")
	for _, fd := range facts.Fields(f) {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", fd.Name, fd.Type, fd.Presence, strings.ReplaceAll(fd.Doc, "|", `\|`))
	}
	return b.String()
}
