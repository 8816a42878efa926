// Command configdoc writes docs/CONFIG.md, the configuration reference of
// sandboxd, from the code: every flag and SANDBOXD_* variable from policy's
// settings table (name, help text, kind, default), the accepted values as
// policy.Config.Validate states them (found by probing it, so the document
// says exactly what the supervisor enforces), and the fields of the helper's
// own root-owned config with the defaults `make install` writes.
//
// Run it with `go generate ./policy/`. Its test fails when docs/CONFIG.md
// differs from what it would write, so the reference cannot drift from the
// code.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/internal/atomicfile"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/policy"
)

func main() {
	out := flag.String("out", "", "write the reference to this file (default: standard output)")
	flag.Parse()
	doc, err := Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
	if *out == "" {
		_, _ = os.Stdout.Write(doc)
		return
	}
	if err := atomicfile.WriteFile(*out, doc, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

// probes are the values tried against Validate, by kind. Each that is
// refused contributes Validate's own words to the "accepted" column.
var probes = map[string][]string{
	"string":           {"", "relative/path", "/" + strings.Repeat("a", 200), "a/b", ".."},
	"bool":             nil,
	"integer":          {"-1", "0", "9223372036854775807"},
	"unsigned integer": {"0", "18446744073709551615"},
	"size":             {"0", "1", "9223372036854775807"},
	"number":           {"-1", "0", "1e9"},
	"id list":          {"4294967295"},
	"duration":         {"-1s", "0"},
	"N or MIN:MAX":     {"-1", "2:1", "33"},
}

// accepted describes the values of one setting that Validate (and the
// flag's parser) accept, with every other setting at its default.
func accepted(d policy.SettingDoc) (string, error) {
	if msgs, err := probe(d.Flag, d.Default); err != nil || len(msgs) > 0 {
		return "", fmt.Errorf("the default %q of --%s is refused: %w %q", d.Default, d.Flag, err, msgs)
	}
	var phrases []string
	seen := map[string]bool{}
	for _, v := range probes[d.Kind] {
		msgs, err := probe(d.Flag, v)
		if err != nil {
			return "", err
		}
		for _, m := range msgs {
			if !strings.HasPrefix(m, "--"+d.Flag+": ") && strings.Contains(m, "(--"+d.Flag+")") {
				// Another setting bounded by this one: a consequence
				// of the probe, said better by this one's own message.
				continue
			}
			p := phrase(d.Flag, m)
			if !seen[p] {
				seen[p] = true
				phrases = append(phrases, p)
			}
		}
	}
	switch {
	case d.Kind == "bool":
		return "true or false", nil
	case len(phrases) == 0:
		return "any", nil
	}
	return strings.Join(phrases, "; "), nil
}

// probe runs policy.Load with --flag=value and returns the messages of the
// errors it reports.
func probe(name, value string) ([]string, error) {
	fs := flag.NewFlagSet("probe", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, err := policy.Load(fs, []string{"--" + name + "=" + value}, func(string) string { return "" })
	if err == nil {
		return nil, nil
	}
	text := err.Error()
	if rest, ok := strings.CutPrefix(text, "flags: "); ok {
		_, msg, ok := strings.Cut(rest, "for flag -"+name+": ")
		if !ok {
			return nil, fmt.Errorf("probe --%s=%q: unexpected flag error %q", name, value, rest)
		}
		return []string{msg}, nil
	}
	text, ok := strings.CutPrefix(text, "invalid configuration: ")
	if !ok {
		return nil, fmt.Errorf("probe --%s=%q: unexpected error: %w", name, value, err)
	}
	return strings.Split(text, "\n"), nil
}

var (
	leadingValue = regexp.MustCompile(`^(?:"(?:[^"\\]|\\.)*"|-?[0-9][0-9.e+]*)(?: (?:bytes|ms|s))? (?:is )?`)
	rewrites     = []struct {
		re   *regexp.Regexp
		repl string
	}{
		{regexp.MustCompile(`^out of range (.*)$`), "$1"},
		{regexp.MustCompile(`^below (.*)$`), "at least $1"},
		{regexp.MustCompile(`^negative(.*)$`), "not negative$1"},
		{regexp.MustCompile(`^(?:must be set)$`), "required"},
		{regexp.MustCompile(`^(?:not|must be) an absolute path$`), "an absolute path"},
		{regexp.MustCompile(`^must be a single directory name$`), "a single directory name"},
		{regexp.MustCompile(`^contains a NUL byte$`), "no NUL byte"},
		{regexp.MustCompile(`^not a numeric id \((.*)\)$`), "numeric ids $1, as a comma list or by repeating the flag"},
		{regexp.MustCompile(`^[0-9]+ bytes; a Unix socket path can have at most ([0-9]+)$`), "at most $1 bytes (a Unix socket path)"},
	}
)

// phrase turns one of Validate's messages into what the value must be.
func phrase(name, msg string) string {
	if rest, ok := strings.CutPrefix(msg, "--"+name+": "); ok {
		msg = rest
	} else if strings.HasPrefix(msg, "--") {
		// Reported under another flag's name: keep it as it is said.
		return "refused as: " + msg
	}
	msg = leadingValue.ReplaceAllString(msg, "")
	for _, r := range rewrites {
		if r.re.MatchString(msg) {
			return r.re.ReplaceAllString(msg, r.repl)
		}
	}
	return msg
}

func humanSize(s string) string {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n == 0 {
		return s
	}
	for _, u := range []struct {
		name string
		mult int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n%u.mult == 0 {
			return fmt.Sprintf("%s (%d %s)", s, n/u.mult, u.name)
		}
	}
	return s
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// Generate returns the reference document.
func Generate() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(header)
	b.WriteString("| flag | environment variable | kind | default | accepted | meaning |\n|---|---|---|---|---|---|\n")
	for _, d := range policy.SettingDocs() {
		acc, err := accepted(d)
		if err != nil {
			return nil, err
		}
		def := d.Default
		switch {
		case def == "":
			def = "(empty)"
		case d.Kind == "size":
			def = humanSize(def)
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | `%s` | %s | %s |\n", d.Flag, d.Env, d.Kind, cell(def), cell(acc), cell(d.Usage))
	}
	b.WriteString(middle)
	if err := helperConfig(&b); err != nil {
		return nil, err
	}
	b.WriteString(footer)
	return b.Bytes(), nil
}

// helperConfig documents nsinit/config.Config: the JSON fields, the Go doc
// comment of each, and the value `make install` writes.
func helperConfig(b *bytes.Buffer) error {
	docs, err := fieldDocs()
	if err != nil {
		return err
	}
	def := config.Default("/var/lib/sandboxd/workspaces", "/usr/local/libexec/sandboxd/sandboxd-exec", "/etc/sandboxd/profiles/payload.json")
	t := reflect.TypeOf(def)
	v := reflect.ValueOf(def)
	b.WriteString("| field | meaning | value written by `make install` |\n|---|---|---|\n")
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		raw, err := json.Marshal(v.Field(i).Interface())
		if err != nil {
			return err
		}
		val := string(raw)
		if len(val) > 160 {
			val = val[:157] + "…"
		}
		doc, ok := docs[f.Name]
		if !ok {
			return fmt.Errorf("nsinit/config.Config.%s has no doc comment", f.Name)
		}
		fmt.Fprintf(b, "| `%s` | %s | `%s` |\n", name, cell(doc), cell(val))
	}
	return nil
}

// fieldDocs reads the doc comments of config.Config's fields from its source.
func fieldDocs() (map[string]string, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	src := filepath.Join(root, "nsinit", "config", "config.go")
	f, err := parser.ParseFile(token.NewFileSet(), src, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		ts, ok := n.(*ast.TypeSpec)
		if !ok || ts.Name.Name != "Config" {
			return true
		}
		st, ok := ts.Type.(*ast.StructType)
		if !ok {
			return false
		}
		for _, fld := range st.Fields.List {
			text := strings.Join(strings.Fields(fld.Doc.Text()), " ")
			for _, n := range fld.Names {
				out[n.Name] = text
			}
		}
		return false
	})
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no Config struct", src)
	}
	return out, nil
}

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

const header = `<!-- Code generated by policy/internal/configdoc (go generate ./policy/); DO NOT EDIT. -->

# sandboxd configuration reference

Every setting of the supervisor is a flag and a ` + "`SANDBOXD_*`" + ` environment
variable, from one table in ` + "`policy/config.go`" + `: a flag wins over its
variable, a variable over the default. An empty variable counts as unset.
Sizes are bytes, or a number with ` + "`K`/`KiB`, `M`/`MiB`, `G`/`GiB`" + ` (binary
units, case-insensitive).

The supervisor validates every setting at start-up and refuses to start (exit
2) with a message naming the flag when one is out of range. The "accepted"
column is what that validation says, with every other setting at its
default; where a bound is another flag, it is named.

This file is generated from the code (` + "`go generate ./policy/`" + `); a test in
` + "`make test`" + ` fails when it is stale.

## sandboxd (the supervisor)

`

const middle = `
` + "`sandboxd --version`" + ` prints the version and exits.

## sandboxctl

` + "`sandboxctl`" + ` reads ` + "`SANDBOXD_SOCKET`" + ` (default
` + "`/run/sandboxd/sandboxd.sock`" + `) for ` + "`--socket`" + `. ` + "`sandboxctl doctor`" + ` also
reads ` + "`SANDBOXD_HELPER`" + ` and ` + "`SANDBOXD_HELPER_CONFIG`" + ` for ` + "`--helper`" + ` and
` + "`--helper-config`" + `, with the supervisor's defaults above.

## The helper's config (` + "`/etc/sandboxd/nsinit.json`" + `)

sandboxd-nsinit reads its trust-defining settings from this file only: its
path is compiled in (` + "`make NSINIT_CONFIG=...`" + `), never taken from argv or the
environment. It must be root-owned and not writable by group or others, and
so must every directory above it; unknown fields are refused. ` + "`make install`" + `
writes it with ` + "`sandboxctl admin helper-config`" + `; the workspace root follows
` + "`SANDBOXD_STATE_DIR`" + ` (` + "`<state-dir>/workspaces`" + `).

`

const footer = `
The payload profile's compiled cache is ` + "`<payload_profile>.bpf`" + `, written by
` + "`sandboxd-nsinit --compile-profile PROFILE`" + ` as root; ` + "`sandboxctl doctor`" + ` says
whether it matches.
`
