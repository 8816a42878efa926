package main

import (
	"os"
	"strings"
	"testing"
)

// TestGeneratedTypesAreCurrent: src/openapi.ts is what the generator makes
// of docs/openapi.yaml today, so the TypeScript SDK (which compiles against
// it) cannot drift from the contract unnoticed.
func TestGeneratedTypesAreCurrent(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(doc)
	if err != nil {
		t.Fatal(err)
	}
	have, err := os.ReadFile("../src/openapi.ts")
	if err != nil {
		t.Fatal(err)
	}
	if string(have) != want {
		t.Fatal("clients/typescript/src/openapi.ts is stale: run `go run ./clients/typescript/openapigen` from the repository root")
	}
}

func TestTypes(t *testing.T) {
	cases := []struct {
		name   string
		schema schema
		want   string
	}{
		{"nullable integer", schema{"type": []any{"integer", "null"}}, "number | null"},
		{"enum", schema{"type": "string", "enum": []any{"a", "", nil}}, `"a" | "" | null`},
		{"ref", schema{"$ref": "#/components/schemas/Usage"}, "Usage"},
		{"property ref", schema{"$ref": "#/components/schemas/ExecRequest/properties/code"}, `ExecRequest["code"]`},
		{"foreign ref", schema{"$ref": "other.yaml#/X"}, "unknown"},
		{"map", schema{"type": "object", "additionalProperties": schema{"type": "string"}}, "Record<string, string>"},
		{"array", schema{"type": "array", "items": schema{"type": "boolean"}}, "Array<boolean>"},
		{"untyped", schema{"description": "any JSON"}, "unknown"},
		{"object", schema{"type": "object", "required": []any{"a"}, "properties": schema{"a": schema{"type": "string"}, "b": schema{"type": "integer", "description": "x */ y"}}},
			"{\n  a: string;\n  /**\n   * x *\\/ y\n   */\n  b?: number;\n}"},
	}
	for _, tc := range cases {
		if got := tsType(tc.schema, ""); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	if _, err := generate([]byte("components: {}")); err == nil || !strings.Contains(err.Error(), "no components.schemas") {
		t.Errorf("an empty document: %v", err)
	}
}
