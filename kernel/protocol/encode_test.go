package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

func TestEncodeExecute(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	if err := enc.Execute(Execute{ID: "e1", Code: "print(1)\n", Entrypoint: "main", Inputs: json.RawMessage(`{"x":1}`)}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Interrupt("e1"); err != nil {
		t.Fatal(err)
	}
	if err := enc.Shutdown(); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"execute","id":"e1","code":"print(1)\n","stdin":"","entrypoint":"main","inputs":{"x":1}}` + "\n" +
		`{"type":"interrupt","id":"e1"}` + "\n" + `{"type":"shutdown"}` + "\n"
	if buf.String() != want {
		t.Fatalf("wire:\n%s\nwant:\n%s", buf.String(), want)
	}
}

func TestEncodeRejects(t *testing.T) {
	cases := []struct {
		name string
		req  Execute
	}{
		{"empty id", Execute{Code: "1"}},
		{"bad id", Execute{ID: "a b", Code: "1"}},
		{"invalid utf8 code", Execute{ID: "e", Code: "\xff"}},
		{"entrypoint not identifier", Execute{ID: "e", Entrypoint: "main()"}},
		{"inputs without entrypoint", Execute{ID: "e", Inputs: json.RawMessage(`{}`)}},
		{"inputs array", Execute{ID: "e", Entrypoint: "main", Inputs: json.RawMessage(`[1]`)}},
		{"inputs invalid", Execute{ID: "e", Entrypoint: "main", Inputs: json.RawMessage(`{"a":`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := NewEncoder(&buf).Execute(tc.req)
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("Execute = %v, want invalid", err)
			}
			if buf.Len() != 0 {
				t.Fatalf("wrote %q for an invalid request", buf.String())
			}
		})
	}
}

// TestEncodeExecuteEnv: an exec's env travels on its execute request as an
// object of strings; an exec without env sends none, and a name or value
// that is not UTF-8 is refused rather than rewritten.
func TestEncodeExecuteEnv(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	if err := enc.Execute(Execute{ID: "e1", Code: "1", Env: map[string]string{"B": "2", "A": "x y"}}); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"execute","id":"e1","code":"1","stdin":"","entrypoint":"","inputs":null,"env":{"A":"x y","B":"2"}}` + "\n"
	if buf.String() != want {
		t.Fatalf("wire:\n%s\nwant:\n%s", buf.String(), want)
	}
	buf.Reset()
	if err := enc.Execute(Execute{ID: "e2", Code: "1", Env: map[string]string{"A": "\xff"}}); !errors.Is(err, errdefs.ErrInvalid) || buf.Len() != 0 {
		t.Fatalf("Execute with a non-UTF-8 value = %v, wrote %q", err, buf.String())
	}
}
