package api

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// The contract test ties docs/openapi.yaml and docs/API.md to the types of
// this package, so that the three cannot drift apart: every example of the
// OpenAPI file and every json block of API.md decodes strictly into its
// type and survives a round trip, every schema and every field table of
// API.md has exactly the fields of its type, and the error codes of API.md's
// table and the OpenAPI enum are the closed set here.

const (
	openapiPath = "../docs/openapi.yaml"
	apiMDPath   = "../docs/API.md"
)

// schemaTypes maps each schema of components/schemas to its Go type. A
// schema missing here fails the test: a new body needs a type.
var schemaTypes = map[string]reflect.Type{
	"ExecRequest":             reflect.TypeFor[ExecRequest](),
	"SessionExecRequest":      reflect.TypeFor[ExecRequest](),
	"ExecFile":                reflect.TypeFor[ExecFile](),
	"ExecResult":              reflect.TypeFor[ExecResult](),
	"Usage":                   reflect.TypeFor[Usage](),
	"Artifact":                reflect.TypeFor[Artifact](),
	"PolicyAttestation":       reflect.TypeFor[PolicyAttestation](),
	"NetworkResult":           reflect.TypeFor[NetworkResult](),
	"Connection":              reflect.TypeFor[Connection](),
	"Limits":                  reflect.TypeFor[Limits](),
	"HealthChecks":            reflect.TypeFor[HealthChecks](),
	"Health":                  reflect.TypeFor[Health](),
	"Liveness":                reflect.TypeFor[Liveness](),
	"SessionCreateRequest":    reflect.TypeFor[SessionCreateRequest](),
	"Session":                 reflect.TypeFor[Session](),
	"SessionList":             reflect.TypeFor[SessionList](),
	"FileInfo":                reflect.TypeFor[FileInfo](),
	"FileList":                reflect.TypeFor[FileList](),
	"Uploaded":                reflect.TypeFor[Uploaded](),
	"KernelInfo":              reflect.TypeFor[KernelInfo](),
	"Display":                 reflect.TypeFor[Display](),
	"Exception":               reflect.TypeFor[Exception](),
	"Kernel":                  reflect.TypeFor[Kernel](),
	"EnvironmentRef":          reflect.TypeFor[EnvironmentRef](),
	"Package":                 reflect.TypeFor[Package](),
	"Environment":             reflect.TypeFor[Environment](),
	"EnvironmentList":         reflect.TypeFor[EnvironmentList](),
	"EnvironmentBuildRequest": reflect.TypeFor[EnvironmentBuildRequest](),
	"EnvironmentHealth":       reflect.TypeFor[EnvironmentHealth](),
	"KeysHealth":              reflect.TypeFor[KeysHealth](),
	"ErrorCode":               reflect.TypeFor[ErrorCode](),
	"Error":                   reflect.TypeFor[ErrorBody](),
	"Settings":                reflect.TypeFor[Settings](),
	"Setting":                 reflect.TypeFor[Setting](),
	"SettingsPatch":           reflect.TypeFor[SettingsPatch](),
}

func loadOpenAPI(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(openapiPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", openapiPath, err)
	}
	return doc
}

// get walks doc along keys; it fails the test when a key is missing.
func get(t *testing.T, doc any, keys ...string) any {
	t.Helper()
	cur := doc
	for i, k := range keys {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("openapi: %s is not a map", strings.Join(keys[:i], "/"))
		}
		if cur, ok = m[k]; !ok {
			t.Fatalf("openapi: no %s", strings.Join(keys[:i+1], "/"))
		}
	}
	return cur
}

// refName returns the schema name of a {$ref: "#/components/schemas/X"}.
func refName(schema any) (string, bool) {
	m, ok := schema.(map[string]any)
	if !ok {
		return "", false
	}
	ref, ok := m["$ref"].(string)
	if !ok {
		return "", false
	}
	name, ok := strings.CutPrefix(ref, "#/components/schemas/")
	return name, ok && !strings.Contains(name, "/")
}

// example is one example of the OpenAPI file: where it is, the Go type it
// must decode into, and its value.
type example struct {
	where string
	typ   reflect.Type
	value any
}

// collectExamples walks the whole document. A media type object (a map
// with "schema" and "example"/"examples") gives body examples; the
// properties of components/schemas give field examples; parameters and
// headers give string examples. Any other "example"/"examples" key is an
// error, so no example escapes the test.
func collectExamples(t *testing.T, doc map[string]any) []example {
	t.Helper()
	var out []example
	var walk func(path []string, node any)
	walk = func(path []string, node any) {
		where := strings.Join(path, "/")
		switch n := node.(type) {
		case []any:
			for i, v := range n {
				walk(append(slices.Clip(path), strconv.Itoa(i)), v)
			}
			return
		case map[string]any:
			vals := exampleValues(t, where, n)
			if len(vals) > 0 {
				typ := exampleType(t, doc, path, n)
				for name, v := range vals {
					out = append(out, example{where: where + "#" + name, typ: typ, value: v})
				}
			}
			for k, v := range n {
				if k == "example" || k == "examples" {
					continue
				}
				walk(append(slices.Clip(path), k), v)
			}
		}
	}
	walk(nil, doc)
	sort.Slice(out, func(i, j int) bool { return out[i].where < out[j].where })
	return out
}

// exampleValues returns the examples of node by name: OpenAPI's
// "example" (one value), "examples" as a map of Example Objects ({value:
// ...}), or JSON Schema's "examples" (a list of values).
func exampleValues(t *testing.T, where string, n map[string]any) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if v, ok := n["example"]; ok {
		vals["example"] = v
	}
	switch ex := n["examples"].(type) {
	case nil:
	case []any:
		for i, v := range ex {
			vals["examples/"+strconv.Itoa(i)] = v
		}
	case map[string]any:
		for name, e := range ex {
			obj, ok := e.(map[string]any)
			if _, has := obj["value"]; !ok || !has {
				t.Fatalf("%s: examples/%s is not an Example Object with a value", where, name)
			}
			vals["examples/"+name] = obj["value"]
		}
	default:
		t.Fatalf("%s: examples is neither a list nor a map", where)
	}
	return vals
}

var stringType = reflect.TypeFor[string]()

// exampleType says which Go type the examples of node (at path) must
// decode into.
func exampleType(t *testing.T, doc map[string]any, path []string, n map[string]any) reflect.Type {
	t.Helper()
	where := strings.Join(path, "/")
	if schema, ok := n["schema"]; ok {
		// A media type, parameter or header object.
		if name, ok := refName(schema); ok {
			typ, ok := schemaTypes[name]
			if !ok {
				t.Fatalf("%s: schema %s has no Go type in schemaTypes", where, name)
			}
			return typ
		}
		if s, ok := schema.(map[string]any); ok && s["type"] == "string" {
			return stringType
		}
		t.Fatalf("%s: examples next to a schema that is neither a $ref nor a string", where)
	}
	// A schema itself: components/schemas/<S>/properties/<p>[/...], or a
	// header/parameter schema.
	if len(path) >= 5 && path[0] == "components" && path[1] == "schemas" && path[3] == "properties" {
		typ, ok := schemaTypes[path[2]]
		if !ok {
			t.Fatalf("%s: schema %s has no Go type in schemaTypes", where, path[2])
		}
		f, ok := fieldByJSON(typ, path[4])
		if !ok {
			t.Fatalf("%s: %s has no field %q", where, typ, path[4])
		}
		ft := f.Type
		if len(path) == 6 && path[5] == "propertyNames" || len(path) == 6 && path[5] == "items" {
			ft = ft.Elem()
		} else if len(path) != 5 {
			t.Fatalf("%s: examples this deep in a schema are not understood by the test", where)
		}
		return ft
	}
	if len(path) >= 4 && path[0] == "components" && (path[1] == "headers" || path[1] == "parameters") && path[3] == "schema" {
		return stringType
	}
	t.Fatalf("%s: an example the contract test does not know how to check", where)
	return nil
}

// fieldByJSON finds the field of struct type typ whose JSON name is name.
func fieldByJSON(typ reflect.Type, name string) (reflect.StructField, bool) {
	for f := range jsonFields(typ) {
		if f.name == name {
			return f.StructField, true
		}
	}
	return reflect.StructField{}, false
}

type jsonField struct {
	reflect.StructField
	name      string
	omitempty bool
}

// jsonFields yields the encoded fields of a struct type.
func jsonFields(typ reflect.Type) func(func(jsonField) bool) {
	return func(yield func(jsonField) bool) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			tag := f.Tag.Get("json")
			if !f.IsExported() || tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if name == "" {
				name = f.Name
			}
			if !yield(jsonField{StructField: f, name: name, omitempty: strings.Contains(opts, "omitempty")}) {
				return
			}
		}
	}
}

// decodeStrict decodes b into a new value of typ as the supervisor does:
// unknown fields and trailing data are errors.
func decodeStrict(b []byte, typ reflect.Type) (reflect.Value, error) {
	v := reflect.New(typ)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return v, err
	}
	if dec.More() {
		return v, fmt.Errorf("trailing data after the value")
	}
	return v, nil
}

// checkExample decodes the JSON text in strictly into a new value of typ,
// re-encodes it, compares the two semantically and checks that the
// example is self-consistent (see consistent).
func checkExample(in []byte, typ reflect.Type) error {
	v, err := decodeStrict(in, typ)
	if err != nil {
		return fmt.Errorf("does not decode strictly into %s: %w", typ, err)
	}
	out, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	var a, b any
	if err := json.Unmarshal(in, &a); err != nil {
		return err
	}
	if err := json.Unmarshal(out, &b); err != nil {
		return err
	}
	if d := semanticDiff("", a, b); d != "" {
		return fmt.Errorf("round trip through %s changed it: %s (out: %s)", typ, d, out)
	}
	return consistent(v.Elem().Interface())
}

var (
	hex32 = regexp.MustCompile(`^[0-9a-f]{32}$`)
	hex64 = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// consistent checks what a type cannot say: an example must be an answer
// sandboxd could give (a known error code, an artifact whose size and hash
// are of its content, a session whose expiry is its last use plus its TTL).
func consistent(v any) error {
	switch x := v.(type) {
	case ErrorCode:
		if !x.Known() {
			return fmt.Errorf("error code %q is not in the closed set", x)
		}
	case ErrorBody:
		if !x.Error.Code.Known() || x.Error.Message == "" {
			return fmt.Errorf("error body with code %q (known: %v) and message %q", x.Error.Code, x.Error.Code.Known(), x.Error.Message)
		}
	case Artifact:
		b, err := base64.StdEncoding.DecodeString(x.ContentBase64)
		if err != nil {
			return fmt.Errorf("artifact %s: content_base64: %w", x.Path, err)
		}
		sum := sha256.Sum256(b)
		if int64(len(b)) != x.Size || hex.EncodeToString(sum[:]) != x.SHA256 {
			return fmt.Errorf("artifact %s: size %d and sha256 %s are not those of its content (%d bytes, %x)", x.Path, x.Size, x.SHA256, len(b), sum)
		}
	case ExecResult:
		if !hex32.MatchString(x.ID) {
			return fmt.Errorf("exec id %q is not 32 lowercase hex characters", x.ID)
		}
		if (x.ExitCode == nil) == (x.Signal == nil) {
			return errors.New("exactly one of exit_code and signal is set")
		}
		if (x.TimedOut || x.QuotaExceeded || x.OOMKilled) && (x.Signal == nil || *x.Signal != "SIGKILL") {
			return errors.New("a killed exec has signal SIGKILL")
		}
		for _, a := range x.Artifacts {
			if err := consistent(a); err != nil {
				return err
			}
		}
	case Session:
		if !hex32.MatchString(x.ID) {
			return fmt.Errorf("session id %q is not 32 lowercase hex characters", x.ID)
		}
		if want := x.LastUsedAt.Add(time.Duration(x.TTLSeconds) * time.Second); !x.ExpiresAt.Equal(want) {
			return fmt.Errorf("session expires_at %s is not last_used_at + ttl_seconds (%s)", x.ExpiresAt, want)
		}
	case SessionList:
		for _, s := range x.Sessions {
			if err := consistent(s); err != nil {
				return err
			}
		}
	case Uploaded:
		if !hex64.MatchString(x.SHA256) {
			return fmt.Errorf("uploaded sha256 %q is not 64 lowercase hex characters", x.SHA256)
		}
	case Health:
		if x.OK != x.Checks.Ready() {
			return fmt.Errorf("health ok %v, but the checks say ready=%v", x.OK, x.Checks.Ready())
		}
	}
	return nil
}

// TestOpenAPIExamples decodes every example of docs/openapi.yaml strictly
// into its type, re-encodes it and compares the two semantically.
func TestOpenAPIExamples(t *testing.T) {
	doc := loadOpenAPI(t)
	examples := collectExamples(t, doc)
	if len(examples) < 40 {
		t.Fatalf("found only %d examples in %s; the walk is broken", len(examples), openapiPath)
	}
	perType := map[reflect.Type]int{}
	for _, ex := range examples {
		t.Run(ex.where, func(t *testing.T) {
			in, err := json.Marshal(ex.value)
			if err != nil {
				t.Fatalf("example is not JSON: %v", err)
			}
			if err := checkExample(in, ex.typ); err != nil {
				t.Fatalf("%s: %v", in, err)
			}
		})
		perType[ex.typ]++
	}
	// Every request and answer body has at least one example.
	for _, typ := range bodyTypes {
		if perType[typ] == 0 {
			t.Errorf("%s has no example in %s", typ, openapiPath)
		}
	}
	t.Logf("%d examples checked", len(examples))
}

// bodyTypes are the request and answer bodies.
var bodyTypes = []reflect.Type{
	reflect.TypeFor[ExecRequest](), reflect.TypeFor[ExecResult](), reflect.TypeFor[Health](),
	reflect.TypeFor[SessionCreateRequest](), reflect.TypeFor[Session](), reflect.TypeFor[SessionList](),
	reflect.TypeFor[FileList](), reflect.TypeFor[Uploaded](), reflect.TypeFor[ErrorBody](),
	reflect.TypeFor[Settings](), reflect.TypeFor[SettingsPatch](),
	reflect.TypeFor[EnvironmentList](), reflect.TypeFor[EnvironmentBuildRequest](),
}

// TestAPIMDExamples: every ```json block of docs/API.md is a body: it
// passes checkExample for one of the body types.
func TestAPIMDExamples(t *testing.T) {
	b, err := os.ReadFile(apiMDPath)
	if err != nil {
		t.Fatal(err)
	}
	blocks := jsonBlocks(string(b))
	if len(blocks) < 8 {
		t.Fatalf("found only %d json blocks in %s; the parser is broken", len(blocks), apiMDPath)
	}
	for _, blk := range blocks {
		var errs []string
		matched := false
		for _, typ := range bodyTypes {
			err := checkExample([]byte(blk.text), typ)
			if err == nil {
				matched = true
				break
			}
			errs = append(errs, err.Error())
		}
		if !matched {
			t.Errorf("%s:%d: the json block is no body of the API:\n%s\n%s", apiMDPath, blk.line, blk.text, strings.Join(errs, "\n"))
		}
	}
}

type mdBlock struct {
	line int
	text string
}

// jsonBlocks returns the ```json fenced blocks of a Markdown text.
func jsonBlocks(md string) []mdBlock {
	var out []mdBlock
	var cur *mdBlock
	for i, line := range strings.Split(md, "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```json":
			cur = &mdBlock{line: i + 2}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	return out
}

// TestContractCatchesDrift: the checks above fail on the drift they exist
// for. Each row breaks a good example one way.
func TestContractCatchesDrift(t *testing.T) {
	good := `{"id":"3f7c0b9e5d2a41c8a6e0f1b2c3d4e5f6","exit_code":0,"signal":null,"timed_out":false,"oom_killed":false,
"quota_exceeded":false,"stdout":"1\n","stderr":"","stdout_truncated":false,"stderr_truncated":false,"duration_ms":41,
"usage":{"cpu_ms":30,"max_rss_kb":9000},"artifacts":[{"path":"r.txt","size":2,"sha256":"8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4","content_base64":"aGk="}],
"artifacts_truncated":false,"policy":{"profile_sha256":"a","limits":{"timeout_ms":1,"output_limit_bytes":1,"tmp_size_bytes":1,
"memory_bytes":1,"pids":1,"cpus":1,"nofile":1,"file_size_bytes":1},"mounts_sha256":"b","helper_version":"c"}}`
	result := reflect.TypeFor[ExecResult]()
	if err := checkExample([]byte(good), result); err != nil {
		t.Fatalf("the good example fails: %v", err)
	}
	for _, tc := range []struct {
		name, from, to string
		typ            reflect.Type
	}{
		{"unknown field", `"duration_ms":41`, `"duration_ms":41,"wall_ms":41`, result},
		{"renamed field", `"max_rss_kb"`, `"max_rss"`, result},
		{"unknown limit", `"nofile":1`, `"nofile":1,"nproc":1`, result},
		{"wrong type", `"duration_ms":41`, `"duration_ms":"41"`, result},
		{"trailing data", `"helper_version":"c"}}`, `"helper_version":"c"}} {}`, result},
		{"artifact hash not of its content", `"content_base64":"aGk="`, `"content_base64":"aGo="`, result},
		{"both exit code and signal", `"signal":null`, `"signal":"SIGKILL"`, result},
		{"unknown error code", good, `{"error":{"code":"not_allowed","message":"m"}}`, reflect.TypeFor[ErrorBody]()},
		{"error without message", good, `{"error":{"code":"internal"}}`, reflect.TypeFor[ErrorBody]()},
		{"session expiry not last use plus ttl", good, `{"id":"d217d2b269e09e6cf79feb0cfe92d223","created_at":"2026-11-29T12:10:55Z",
"expires_at":"2026-11-29T13:10:55Z","last_used_at":"2026-11-29T12:10:55Z","ttl_seconds":1800,"restored":false,"disk_bytes":0,"busy":false}`, reflect.TypeFor[Session]()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(good, tc.from, tc.to, 1)
			if bad == good {
				t.Fatalf("the mutation %q -> %q did not apply", tc.from, tc.to)
			}
			if err := checkExample([]byte(bad), tc.typ); err == nil {
				t.Fatalf("drift not caught: %s", bad)
			}
		})
	}

	// A schema that gained a property the type lacks, and a type field the
	// schema lacks.
	usage := map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"cpu_ms", "max_rss_kb"},
		"properties": map[string]any{"cpu_ms": map[string]any{}, "max_rss_kb": map[string]any{}, "source": map[string]any{}},
	}
	if p := schemaProblems("Usage", usage, reflect.TypeFor[Usage]()); len(p) != 0 {
		t.Fatalf("the good schema has problems: %v", p)
	}
	usage["properties"].(map[string]any)["wall_ms"] = map[string]any{}
	if p := schemaProblems("Usage", usage, reflect.TypeFor[Usage]()); len(p) != 1 {
		t.Fatalf("an extra schema property: problems %v, want 1", p)
	}
	delete(usage["properties"].(map[string]any), "wall_ms")
	delete(usage["properties"].(map[string]any), "cpu_ms")
	if p := schemaProblems("Usage", usage, reflect.TypeFor[Usage]()); len(p) != 1 {
		t.Fatalf("a field missing from the schema: problems %v, want 1", p)
	}
}

// semanticDiff compares two decoded JSON values. Numbers compare by value;
// a key present on one side only must hold a JSON zero on the other
// ("", 0, false, null, [], {}), which is what API.md calls "the same as
// leaving it out". It returns "" when they are the same.
func semanticDiff(path string, a, b any) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return fmt.Sprintf("%s: object became %T", path, b)
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		for k := range keys {
			xv, xok := x[k]
			yv, yok := y[k]
			switch {
			case xok && yok:
				if d := semanticDiff(path+"."+k, xv, yv); d != "" {
					return d
				}
			case xok && !isZero(xv):
				return fmt.Sprintf("%s.%s: %v was dropped", path, k, xv)
			case yok && !isZero(yv):
				return fmt.Sprintf("%s.%s: %v appeared", path, k, yv)
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok {
			if b == nil && len(x) == 0 {
				return ""
			}
			return fmt.Sprintf("%s: array became %T", path, b)
		}
		if len(x) != len(y) {
			return fmt.Sprintf("%s: %d elements became %d", path, len(x), len(y))
		}
		for i := range x {
			if d := semanticDiff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); d != "" {
				return d
			}
		}
		return ""
	case float64:
		if y, ok := b.(float64); !ok || math.Abs(x-y) > 0 {
			return fmt.Sprintf("%s: %v became %v", path, a, b)
		}
		return ""
	case nil:
		if !isZero(b) {
			return fmt.Sprintf("%s: null became %v", path, b)
		}
		return ""
	default:
		if a != b {
			return fmt.Sprintf("%s: %#v became %#v", path, a, b)
		}
		return ""
	}
}

func isZero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case float64:
		return x == 0
	case bool:
		return !x
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// TestSchemasMatchTypes checks each object schema against its Go type: the
// same property names as JSON fields, a required property never omitted
// when empty, and a nested $ref pointing at the field's own type.
func TestSchemasMatchTypes(t *testing.T) {
	doc := loadOpenAPI(t)
	schemas := get(t, doc, "components", "schemas").(map[string]any)
	for name := range schemas {
		if _, ok := schemaTypes[name]; !ok {
			t.Errorf("schema %s has no Go type in schemaTypes", name)
		}
	}
	for name, typ := range schemaTypes {
		s, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("schemaTypes names %s, which %s does not define", name, openapiPath)
			continue
		}
		for _, p := range schemaProblems(name, s, typ) {
			t.Error(p)
		}
	}
}

// schemaProblems compares one object schema with its Go type.
func schemaProblems(where string, s map[string]any, typ reflect.Type) []string {
	var out []string
	errorf := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if typ.Kind() != reflect.Struct {
		return nil
	}
	if s["additionalProperties"] != false {
		errorf("%s: object schema without additionalProperties: false (the supervisor decodes strictly)", where)
	}
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if r, ok := s["required"].([]any); ok {
		for _, p := range r {
			required[p.(string)] = true
		}
	}
	seen := map[string]bool{}
	for f := range jsonFields(typ) {
		seen[f.name] = true
		p, ok := props[f.name]
		if !ok {
			errorf("%s: %s.%s (json %q) is not a property of the schema", where, typ, f.Name, f.name)
			continue
		}
		if required[f.name] && f.omitempty {
			errorf("%s: %q is required but %s.%s is omitempty", where, f.name, typ, f.Name)
		}
		ps, _ := p.(map[string]any)
		if ref, ok := refName(p); ok {
			want, known := schemaTypes[ref]
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if !known || want != ft {
				errorf("%s: %q refers to %s, but %s.%s is a %s", where, f.name, ref, typ, f.Name, f.Type)
			}
		} else if ps != nil && ps["type"] == "object" && ps["properties"] != nil {
			out = append(out, schemaProblems(where+"."+f.name, ps, f.Type)...)
		} else if ps != nil && ps["type"] == "array" {
			if ref, ok := refName(ps["items"]); ok && schemaTypes[ref] != f.Type.Elem() {
				errorf("%s: %q items are %s, but %s.%s is a %s", where, f.name, ref, typ, f.Name, f.Type)
			}
		}
	}
	for p := range props {
		if !seen[p] {
			errorf("%s: property %q has no field in %s", where, p, typ)
		}
	}
	return out
}

// TestErrorCodeEnum: the ErrorCode enum of openapi.yaml is the closed set.
func TestErrorCodeEnum(t *testing.T) {
	doc := loadOpenAPI(t)
	var got []ErrorCode
	for _, v := range get(t, doc, "components", "schemas", "ErrorCode", "enum").([]any) {
		got = append(got, ErrorCode(v.(string)))
	}
	if !slices.Equal(got, Codes()) {
		t.Fatalf("openapi ErrorCode enum %v, api.Codes() %v", got, Codes())
	}
}

// TestDisplayMIMEEnum: the OpenAPI file's display types are api's.
func TestDisplayMIMEEnum(t *testing.T) {
	var got []string
	for _, v := range get(t, loadOpenAPI(t), "components", "schemas", "Display", "properties", "mime", "enum").([]any) {
		got = append(got, v.(string))
	}
	if !slices.Equal(got, DisplayMIMEs()) {
		t.Fatalf("openapi Display.mime enum %v, api.DisplayMIMEs() %v", got, DisplayMIMEs())
	}
}

// tableRow is `| `code` | status | ...` in API.md's error table.
var tableRow = regexp.MustCompile("^\\| `([a-z_]+)` \\| (\\*\\*)?([0-9]{3})(\\*\\*)? \\|")

// TestAPIMDErrorTable parses the error table of docs/API.md: every code in
// it exists here with the status the table gives (the one bold exception
// being the 405 of a wrong method), and every code here is in the table.
func TestAPIMDErrorTable(t *testing.T) {
	f, err := os.Open(apiMDPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inErrors := false
	listed := map[ErrorCode]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			inErrors = line == "## Errors"
			continue
		}
		if !inErrors {
			continue
		}
		m := tableRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		code := ErrorCode(m[1])
		status, _ := strconv.Atoi(m[3])
		if !code.Known() {
			t.Errorf("API.md lists code %q, which is not in api.Codes()", code)
			continue
		}
		listed[code] = true
		if m[2] != "" {
			// The only exception API.md marks in bold: a wrong method.
			if code != CodeInvalidArgument || status != 405 {
				t.Errorf("API.md marks %s %d as an exception; only invalid_argument 405 is one", code, status)
			}
			continue
		}
		if code.Status() != status {
			t.Errorf("API.md gives %s status %d; api says %d", code, status, code.Status())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range Codes() {
		if !listed[c] {
			t.Errorf("code %s is missing from API.md's error table", c)
		}
	}
}

// fieldTables maps the headings of docs/API.md whose first "| Field |"
// table documents a body to that body's type.
var fieldTables = map[string]reflect.Type{
	"## GET /v1/health":               reflect.TypeFor[Health](),
	"### Request":                     reflect.TypeFor[ExecRequest](),
	"### Result":                      reflect.TypeFor[ExecResult](),
	"### Policy attestation":          reflect.TypeFor[PolicyAttestation](),
	"### The session object":          reflect.TypeFor[Session](),
	"### POST /v1/sessions":           reflect.TypeFor[SessionCreateRequest](),
	"### GET /v1/sessions/{id}/files": reflect.TypeFor[FileInfo](),
}

// fieldName is a backquoted name in the first column of a field table.
var fieldName = regexp.MustCompile("`([a-z0-9_.]+)`")

// TestAPIMDFieldTables: each field table of docs/API.md names exactly the
// JSON fields of its type. A name may be dotted (usage.cpu_ms) and a row
// may name several fields (`stdout`, `stderr`); every top-level field must
// be named, itself or through one of its own fields.
func TestAPIMDFieldTables(t *testing.T) {
	b, err := os.ReadFile(apiMDPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range fieldTableProblems(string(b)) {
		t.Error(p)
	}
	// The check catches a renamed field: the new name is unknown and the
	// old one undocumented.
	drifted := strings.Replace(string(b), "| `busy` | boolean |", "| `idle` | boolean |", 1)
	if drifted == string(b) || len(fieldTableProblems(drifted)) != 2 {
		t.Fatalf("a renamed session field: problems %q, want 2", fieldTableProblems(drifted))
	}
}

func fieldTableProblems(md string) []string {
	var out []string
	found := map[string]bool{}
	var heading string
	var typ reflect.Type
	var documented map[string]bool
	finish := func() {
		if typ == nil {
			return
		}
		for f := range jsonFields(typ) {
			if !documented[f.name] {
				out = append(out, fmt.Sprintf("%s: %s field %q is not in the table", heading, typ, f.name))
			}
		}
		typ = nil
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "#") {
			finish()
			heading = strings.TrimSpace(line)
			continue
		}
		if t0, ok := fieldTables[heading]; ok && !found[heading] && strings.HasPrefix(line, "| Field |") {
			found[heading], typ, documented = true, t0, map[string]bool{}
			continue
		}
		if typ == nil {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			finish()
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 3 || strings.HasPrefix(cells[1], "---") {
			continue
		}
		for _, m := range fieldName.FindAllStringSubmatch(cells[1], -1) {
			if !resolvesField(typ, m[1]) {
				out = append(out, fmt.Sprintf("%s: the table names %q, which %s does not have", heading, m[1], typ))
			}
			top, _, _ := strings.Cut(m[1], ".")
			documented[top] = true
		}
	}
	finish()
	for h := range fieldTables {
		if !found[h] {
			out = append(out, fmt.Sprintf("no field table under %q in %s", h, apiMDPath))
		}
	}
	sort.Strings(out)
	return out
}

// resolvesField reports whether the dotted JSON path names a field of typ.
func resolvesField(typ reflect.Type, dotted string) bool {
	for _, name := range strings.Split(dotted, ".") {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct {
			return false
		}
		f, ok := fieldByJSON(typ, name)
		if !ok {
			return false
		}
		typ = f.Type
	}
	return true
}

// routes are the paths the supervisor serves (supervisor/server.go routes
// and its session and settings routes); the OpenAPI file documents each,
// and nothing else.
var routes = []string{
	"/healthz",
	"/metrics",
	"/v1/admin/settings",
	"/v1/environments",
	"/v1/environments/build",
	"/v1/exec",
	"/v1/health",
	"/v1/sessions",
	"/v1/sessions/{id}",
	"/v1/sessions/{id}/exec",
	"/v1/sessions/{id}/files",
	"/v1/sessions/{id}/files/{path}",
	"/v1/sessions/{id}/kernels/{language}/restart",
}

// TestOpenAPIPaths: the paths of openapi.yaml are exactly the routes, and
// GET /healthz, the one route served without authentication, answers a
// Liveness.
func TestOpenAPIPaths(t *testing.T) {
	doc := loadOpenAPI(t)
	var got []string
	for p := range get(t, doc, "paths").(map[string]any) {
		got = append(got, p)
	}
	sort.Strings(got)
	if !slices.Equal(got, routes) {
		t.Errorf("openapi paths %q, want the routes %q", got, routes)
	}
	schema := get(t, doc, "paths", "/healthz", "get", "responses", "200", "content", "application/json", "schema")
	if name, ok := refName(schema); !ok || schemaTypes[name] != reflect.TypeFor[Liveness]() {
		t.Errorf("GET /healthz answers %v, want a Liveness", schema)
	}
}
