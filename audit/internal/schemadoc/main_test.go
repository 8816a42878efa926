package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/audit/facts"
)

// TestSchemaDocUpToDate fails when audit/SCHEMA.md's fact tables are not
// what the types of package audit/facts generate: a fact was added, renamed,
// retyped or redocumented without the reference.
func TestSchemaDocUpToDate(t *testing.T) {
	path := filepath.Join("..", "..", "SCHEMA.md")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Generate(got)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s is stale at line %d (run `go generate ./audit/`):\n have %s\n want %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s is stale (run `go generate ./audit/`): %d lines, want %d", path, len(gl), len(wl))
	}
}

func TestGenerateRefusesMissingMarkers(t *testing.T) {
	if _, err := Generate([]byte("# schema\n")); err == nil || !strings.Contains(err.Error(), "markers") {
		t.Fatalf("Generate without markers: %v", err)
	}
}

// Every fact is documented: a table row without a meaning is no reference.
func TestEveryFactDocumented(t *testing.T) {
	for _, f := range facts.All() {
		for _, fd := range facts.Fields(f) {
			if fd.Doc == "" {
				t.Errorf("%s.%s has no doc tag", f.Step(), fd.Name)
			}
		}
	}
}
