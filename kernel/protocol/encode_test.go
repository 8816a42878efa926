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

// TestEncodeExecuteEnv: an exec's env goes on the wire as "env", and a
// request without one carries no "env" field at all.
func TestEncodeExecuteEnv(t *testing.T) {
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	if err := enc.Execute(Execute{ID: "e1", Code: "1", Env: map[string]string{"B": "2", "A": "1=x"}}); err != nil {
		t.Fatal(err)
	}
	if err := enc.Execute(Execute{ID: "e2", Code: "1"}); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"execute","id":"e1","code":"1","stdin":"","entrypoint":"","inputs":null,"env":{"A":"1=x","B":"2"}}` + "\n" +
		`{"type":"execute","id":"e2","code":"1","stdin":"","entrypoint":"","inputs":null}` + "\n"
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
		{"env empty name", Execute{ID: "e", Env: map[string]string{"": "x"}}},
		{"env name with =", Execute{ID: "e", Env: map[string]string{"A=B": "x"}}},
		{"env value with NUL", Execute{ID: "e", Env: map[string]string{"A": "x\x00y"}}},
		{"env invalid utf8", Execute{ID: "e", Env: map[string]string{"A": "\xff"}}},
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
