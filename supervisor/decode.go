package supervisor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/sandboxd/sandboxd/api"
)

// readBody reads a JSON request body of at most max bytes. The whole body is
// read before decoding so that its size can be audited and so that a client
// disconnect is noticed during the exec (net/http watches the connection
// only once the body is consumed).
//
// Content-Type: application/json is required when the header is present
// (parameters allowed; a charset must be utf-8). A request without the
// header is accepted and decoded as JSON all the same: this API has no other
// body format to confuse it with, a browser cannot reach a Unix socket, and
// refusing would only break `curl --unix-socket -d` users for no gain. On a
// TCP listener, which a browser can reach, browserRefusal has already
// required the header on every POST and PATCH.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, *APIError) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return nil, apiErr(api.CodeInvalidArgument, fmt.Sprintf("Content-Type %q is not supported; send application/json", ct))
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
			return nil, apiErr(api.CodeInvalidArgument, fmt.Sprintf("charset %q is not supported; JSON bodies are UTF-8", cs))
		}
	}
	if r.ContentLength > max {
		drainOversized(r.Body)
		return nil, tooLarge(max)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			drainOversized(r.Body)
			return nil, tooLarge(max)
		}
		return nil, apiErr(api.CodeInvalidArgument, fmt.Sprintf("read request body: %v", err))
	}
	return body, nil
}

// maxDrain bounds how much of an oversized body is read and thrown away.
const maxDrain = 64 << 20

// drainOversized reads (and discards) a bounded part of an oversized body
// before the 413 is sent. A client still writing its body when the server
// closes the connection gets EPIPE instead of the answer; on a local socket
// reading a few MiB more is cheaper than an error the caller cannot explain.
// Beyond maxDrain the connection is closed regardless.
func drainOversized(body io.Reader) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrain))
}

func tooLarge(max int64) *APIError {
	return apiErr(api.CodeTooLarge, fmt.Sprintf("request body is larger than the limit of %d bytes", max))
}

// decodeStrict decodes exactly one JSON object into v, refusing unknown
// fields and anything after the object, and says precisely what is wrong.
func decodeStrict(body []byte, v any) *APIError {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return apiErr(api.CodeInvalidArgument, "request body is empty; want a JSON object")
	}
	if trimmed[0] != '{' {
		// null, a number or an array would otherwise decode to a zero
		// request, and the caller would hear about a missing field instead
		// of the real mistake.
		return apiErr(api.CodeInvalidArgument, "request body must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apiErr(api.CodeInvalidArgument, describeJSONError(err, body))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apiErr(api.CodeInvalidArgument, fmt.Sprintf("malformed JSON: unexpected data after the object at byte offset %d", dec.InputOffset()))
	}
	return nil
}

func describeJSONError(err error, body []byte) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("malformed JSON at byte offset %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Sprintf("field %q: want %s, got JSON %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Sprintf("malformed JSON: the body ends early (after %d bytes)", len(body))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + " (fields are decoded strictly; see API.md)"
	default:
		return "malformed JSON: " + strings.TrimPrefix(err.Error(), "json: ")
	}
}

// jsonKind names a Go kind the way an API user thinks of the JSON type.
func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	default:
		return goKind
	}
}
