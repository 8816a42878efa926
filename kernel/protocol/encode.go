package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/errdefs"
)

// Execute asks the kernel to run Code. Entrypoint, when set, names the
// function called after the code with Inputs (a JSON object or nil).
type Execute struct {
	ID         string
	Code       string
	Stdin      string
	Entrypoint string
	Inputs     json.RawMessage
	// Env is this exec's environment, set for it alone over the kernel's
	// own (the runner applies it for the exec and restores it after).
	Env map[string]string
}

// Encoder writes requests to a kernel's fd 0, one line per Write call.
type Encoder struct{ w io.Writer }

// NewEncoder returns an encoder writing to w.
func NewEncoder(w io.Writer) *Encoder { return &Encoder{w: w} }

// wire forms: field order is fixed, so the bytes are reproducible.
type executeWire struct {
	Type       string            `json:"type"`
	ID         string            `json:"id"`
	Code       string            `json:"code"`
	Stdin      string            `json:"stdin"`
	Entrypoint string            `json:"entrypoint"`
	Inputs     json.RawMessage   `json:"inputs"`
	Env        map[string]string `json:"env,omitempty"`
}

type interruptWire struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// Execute validates req and writes it. Invalid requests (a bad id or
// entrypoint, inputs that are not one JSON object, inputs without an
// entrypoint, code or stdin that is not UTF-8) are errdefs.ErrInvalid and
// nothing is written.
func (e *Encoder) Execute(req Execute) error {
	if err := checkExecute(req); err != nil {
		return err
	}
	inputs := req.Inputs
	if len(bytes.TrimSpace(inputs)) == 0 {
		inputs = json.RawMessage("null")
	}
	return e.write(executeWire{Type: TypeExecute, ID: req.ID, Code: req.Code, Stdin: req.Stdin,
		Entrypoint: req.Entrypoint, Inputs: inputs, Env: req.Env})
}

// Interrupt asks the kernel to interrupt exec id if it is still running.
func (e *Encoder) Interrupt(id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	return e.write(interruptWire{Type: TypeInterrupt, ID: id})
}

// Shutdown asks the kernel to exit.
func (e *Encoder) Shutdown() error {
	return e.write(struct {
		Type string `json:"type"`
	}{TypeShutdown})
}

func (e *Encoder) write(v any) error {
	line, err := json.Marshal(v)
	if err != nil {
		return errdefs.New(errdefs.ErrInternal, "encode kernel request", "", err)
	}
	if _, err := e.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write kernel request: %w", err)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf(format, args...), "", nil)
}

func checkExecute(req Execute) error {
	if err := CheckID(req.ID); err != nil {
		return err
	}
	// encoding/json would silently turn invalid UTF-8 into U+FFFD: the
	// kernel would run code other than what the caller sent.
	if !utf8.ValidString(req.Code) || !utf8.ValidString(req.Stdin) {
		return invalid("code and stdin must be valid UTF-8")
	}
	for k, v := range req.Env {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalid("env names and values must be valid UTF-8")
		}
	}
	if req.Entrypoint != "" && !isIdentifier(req.Entrypoint) {
		return invalid("entrypoint %.64q is not an identifier of at most %d bytes", req.Entrypoint, maxEntrypointLen)
	}
	in := bytes.TrimSpace(req.Inputs)
	if len(in) == 0 || bytes.Equal(in, []byte("null")) {
		return nil
	}
	if req.Entrypoint == "" {
		return invalid("inputs need an entrypoint")
	}
	if in[0] != '{' || !json.Valid(in) || !utf8.Valid(in) {
		return invalid("inputs must be one JSON object")
	}
	return nil
}

// isIdentifier accepts ASCII identifiers valid in both Python and
// JavaScript.
func isIdentifier(s string) bool {
	if s == "" || len(s) > maxEntrypointLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
		if !letter && !(i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
