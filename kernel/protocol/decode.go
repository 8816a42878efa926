package protocol

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/sandboxd/sandboxd/errdefs"
)

// ErrProtocol is wrapped by every error the decoder returns for bytes the
// kernel sent (as opposed to a read error of the channel itself).
var ErrProtocol = errors.New("kernel protocol violation")

// readChunk is the bufio buffer: the decoder holds at most MaxFrameBytes
// of one line plus this.
const readChunk = 64 << 10

// Decoder reads frames from a kernel's channel. It is not safe for
// concurrent use. After it returns an error other than io.EOF every later
// call returns the same error: a channel that broke the protocol once is
// not trusted again.
type Decoder struct {
	r     *bufio.Reader
	line  []byte
	err   error
	count int64 // frames read so far, for error messages

	budget  *Budget // nil: no shared bound
	charged int64   // bytes of budget the line buffer holds
}

// Budget makes d charge its line buffer to b (shared by all of a
// supervisor's kernels). Call it before the first Next.
func (d *Decoder) Budget(b *Budget) { d.budget = b }

// Close returns what d holds of its budget; d must not be used after.
func (d *Decoder) Close() {
	d.line = nil
	d.uncharge()
}

// uncharge returns the budget the line buffer held.
func (d *Decoder) uncharge() {
	if d.budget != nil && d.charged > 0 {
		d.budget.release(d.charged)
	}
	d.charged = 0
}

// NewDecoder returns a decoder reading from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, readChunk)}
}

// Next returns the next frame. It returns io.EOF when the channel ends
// cleanly between frames and an error wrapping ErrProtocol (class
// errdefs.ErrInvalid, or errdefs.ErrTooLarge for an over-long line) when
// the kernel broke the protocol.
func (d *Decoder) Next() (Frame, error) {
	if d.err != nil {
		return nil, d.err
	}
	d.count++
	line, err := d.readLine()
	if err == nil {
		var f Frame
		if f, err = parseFrame(line); err == nil {
			return f, nil
		}
	}
	if !errors.Is(err, io.EOF) {
		err = fmt.Errorf("kernel frame %d: %w", d.count, err)
	}
	d.err = err
	return nil, err
}

// readLine reads one '\n'-terminated line without the newline, never
// holding more than MaxFrameBytes of it: bufio.Scanner or ReadBytes would
// buffer whatever the kernel sends.
func (d *Decoder) readLine() ([]byte, error) {
	if cap(d.line) > FreeLineBytes {
		d.line = nil // do not pin a huge buffer between frames
		d.uncharge() // the last frame has been consumed
	}
	d.line = d.line[:0]
	for {
		chunk, err := d.r.ReadSlice('\n')
		if len(d.line)+len(chunk) > MaxFrameBytes+1 { // +1: the newline
			return nil, protoErr(errdefs.ErrTooLarge, "frame longer than %d bytes", MaxFrameBytes)
		}
		if err := d.charge(grownCap(d.line, chunk)); err != nil {
			return nil, err
		}
		d.line = appendBounded(d.line, chunk)
		switch {
		case err == nil:
			return d.line[:len(d.line)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(d.line) == 0:
			return nil, io.EOF
		case errors.Is(err, io.EOF):
			return nil, protoErr(errdefs.ErrInvalid, "channel closed inside a frame (%d bytes without a newline)", len(d.line))
		default:
			return nil, fmt.Errorf("read kernel channel: %w", err)
		}
	}
}

// charge makes the budget cover a line buffer of capacity c before it is
// allocated (beyond FreeLineBytes).
func (d *Decoder) charge(c int) error {
	if d.budget == nil || c <= FreeLineBytes || int64(c) <= d.charged {
		return nil
	}
	if err := d.budget.acquire(int64(c) - d.charged); err != nil {
		return err
	}
	d.charged = int64(c)
	return nil
}

// grownCap is the capacity of line once chunk is appended (appendBounded).
func grownCap(line, chunk []byte) int {
	need := len(line) + len(chunk)
	if need <= cap(line) {
		return cap(line)
	}
	return min(max(2*cap(line), need, readChunk), MaxFrameBytes+1)
}

// appendBounded appends chunk doubling the capacity but never past the
// frame limit: append's own growth (1.25x for large slices) would allocate
// several times the limit in total on the way to a 32 MiB line.
func appendBounded(line, chunk []byte) []byte {
	if need := len(line) + len(chunk); need > cap(line) {
		grown := make([]byte, len(line), grownCap(line, chunk))
		copy(grown, line)
		line = grown
	}
	return append(line, chunk...)
}

func protoErr(class error, format string, args ...any) error {
	return errdefs.New(class, fmt.Sprintf(format, args...), "", ErrProtocol)
}

// fieldSpec lists a frame type's fields: true means required.
var fieldSpecs = map[string]map[string]bool{
	TypeReady:   {"type": true, "language": true, "version": true},
	TypeStream:  {"type": true, "id": true, "name": true, "data": true},
	TypeDisplay: {"type": true, "id": true, "mime": true, "data": false, "data_base64": false},
	TypeResult: {"type": true, "id": true, "exit_code": true, "execution_count": true,
		"return_value": false, "exception": false},
}

// parseFrame validates one line and decodes it into its frame type.
func parseFrame(line []byte) (Frame, error) {
	if !utf8.Valid(line) {
		return nil, protoErr(errdefs.ErrInvalid, "frame is not valid UTF-8")
	}
	if bytes.IndexByte(line, 0) >= 0 {
		return nil, protoErr(errdefs.ErrInvalid, "frame contains a NUL byte")
	}
	if len(line) < 2 || line[0] != '{' || line[len(line)-1] != '}' || !json.Valid(line) {
		return nil, protoErr(errdefs.ErrInvalid, "frame is not one JSON object on one line")
	}
	fields, err := topLevelFields(line)
	if err != nil {
		return nil, err
	}
	typ, err := frameTypeOf(line, fields)
	if err != nil {
		return nil, err
	}
	if err := checkFields(typ, line, fields); err != nil {
		return nil, err
	}
	var f Frame
	switch typ {
	case TypeReady:
		f = &Ready{}
	case TypeStream:
		f = &Stream{}
	case TypeDisplay:
		f = &Display{}
	default:
		f = &Result{}
	}
	if err := decodeStrict(line, f); err != nil {
		return nil, err
	}
	if err := validate(f); err != nil {
		return nil, err
	}
	return f, nil
}

// frameTypeOf reads the "type" field alone, from where topLevelFields
// found it (decoding the whole line for it would scan a 32 MiB frame
// once more).
func frameTypeOf(line []byte, fields map[string]int) (string, error) {
	at, ok := fields["type"]
	if !ok || line[at] != '"' {
		return "", protoErr(errdefs.ErrInvalid, "frame has no string \"type\"")
	}
	var typ string
	if err := json.Unmarshal(line[at:stringEnd(line, at)+1], &typ); err != nil {
		return "", protoErr(errdefs.ErrInvalid, "frame type: %v", err)
	}
	if _, ok := fieldSpecs[typ]; !ok {
		return "", protoErr(errdefs.ErrInvalid, "unknown frame type %.64q", typ)
	}
	return typ, nil
}

// checkFields enforces the exact field names (encoding/json alone would
// accept "ID" for "id") and that null appears only as a return value.
func checkFields(typ string, line []byte, fields map[string]int) error {
	spec := fieldSpecs[typ]
	for name, at := range fields {
		if _, ok := spec[name]; !ok {
			return protoErr(errdefs.ErrInvalid, "unknown field %.64q in a %s frame", name, typ)
		}
		if line[at] == 'n' && name != "return_value" {
			return protoErr(errdefs.ErrInvalid, "field %q of a %s frame is null", name, typ)
		}
	}
	for name, required := range spec {
		if _, ok := fields[name]; required && !ok {
			return protoErr(errdefs.ErrInvalid, "%s frame lacks field %q", typ, name)
		}
	}
	return nil
}

// decodeStrict decodes line into f, refusing unknown nested fields too.
func decodeStrict(line []byte, f Frame) error {
	// The typed struct has no "type" field; wrap it so that the strict
	// decoder accepts the one field the frame struct does not carry.
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var err error
	switch v := f.(type) {
	case *Ready:
		err = dec.Decode(&struct {
			Type string `json:"type"`
			*Ready
		}{Ready: v})
	case *Stream:
		err = dec.Decode(&struct {
			Type string `json:"type"`
			*Stream
		}{Stream: v})
	case *Display:
		err = dec.Decode(&struct {
			Type string `json:"type"`
			*Display
		}{Display: v})
	case *Result:
		err = dec.Decode(&struct {
			Type string `json:"type"`
			*Result
		}{Result: v})
	}
	if err != nil {
		return protoErr(errdefs.ErrInvalid, "%s frame: %v", f.frameType(), err)
	}
	return nil
}

// topLevelFields returns the object's top-level keys, each with the offset
// of its value, and refuses duplicates. line is valid JSON here.
func topLevelFields(line []byte) (map[string]int, error) {
	fields := map[string]int{}
	depth, expectKey := 0, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; c {
		case '"':
			end := stringEnd(line, i)
			if depth == 1 && expectKey {
				var key string
				if err := json.Unmarshal(line[i:end+1], &key); err != nil {
					return nil, protoErr(errdefs.ErrInvalid, "field name: %v", err)
				}
				if _, dup := fields[key]; dup {
					return nil, protoErr(errdefs.ErrInvalid, "duplicate field %.64q", key)
				}
				if len(fields) >= 16 {
					return nil, protoErr(errdefs.ErrInvalid, "too many fields")
				}
				fields[key] = valueStart(line, end+1)
				expectKey = false
			}
			i = end
		case '{', '[':
			depth++
			expectKey = depth == 1
		case '}', ']':
			depth--
		case ',':
			expectKey = depth == 1
		}
	}
	return fields, nil
}

// stringEnd returns the index of the quote closing the string at i.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return len(b) - 1
}

// valueStart returns the offset of the value after the key ending before
// i (skipping the colon and whitespace). In valid JSON there is one.
func valueStart(b []byte, i int) int {
	for ; i < len(b); i++ {
		switch b[i] {
		case ' ', '\t', '\r', '\n', ':':
		default:
			return i
		}
	}
	return len(b) - 1
}

// Signatures the decoder requires of a binary display: an image/png must
// start with the PNG signature, an image/jpeg with a JPEG SOI marker and
// the next marker's 0xFF (every JFIF and Exif file does).
var (
	pngMagic  = []byte("\x89PNG\r\n\x1a\n")
	jpegMagic = []byte{0xFF, 0xD8, 0xFF}
)

// validate checks the ranges and enumerations of a decoded frame.
func validate(f Frame) error {
	switch v := f.(type) {
	case *Ready:
		if v.Language != LanguagePython && v.Language != LanguageJavaScript {
			return protoErr(errdefs.ErrInvalid, "ready: unknown language %.64q", v.Language)
		}
		if err := checkToken("ready: version", v.Version, MaxVersionBytes, false); err != nil {
			return err
		}
	case *Stream:
		if v.Name != StreamStdout && v.Name != StreamStderr {
			return protoErr(errdefs.ErrInvalid, "stream: unknown name %.64q", v.Name)
		}
		return CheckID(v.ID)
	case *Display:
		if err := CheckID(v.ID); err != nil {
			return err
		}
		return validateDisplay(v)
	case *Result:
		return validateResult(v)
	}
	return nil
}

// displayForms says how each display MIME type carries its data: the
// signature its base64 must decode to start with (binary types), or the
// first byte its JSON data must start with ('"' a string, '{' an object).
var displayForms = map[string]struct {
	magic []byte
	first byte
}{
	MIMEPNG:      {magic: pngMagic},
	MIMEJPEG:     {magic: jpegMagic},
	MIMESVG:      {first: '"'},
	MIMEHTML:     {first: '"'},
	MIMEMarkdown: {first: '"'},
	MIMELatex:    {first: '"'},
	MIMEText:     {first: '"'},
	MIMEJSON:     {first: '{'},
	MIMEPlotly:   {first: '{'},
}

func validateDisplay(d *Display) error {
	form, ok := displayForms[d.MIME]
	if !ok {
		return protoErr(errdefs.ErrInvalid, "display: unknown mime %.64q", d.MIME)
	}
	hasData, hasB64 := len(d.Data) > 0, d.DataBase64 != ""
	if form.magic != nil {
		if hasData || !hasB64 {
			return protoErr(errdefs.ErrInvalid, "display %s: needs data_base64 and no data", d.MIME)
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(d.DataBase64)
		if err != nil || !bytes.HasPrefix(raw, form.magic) {
			return protoErr(errdefs.ErrInvalid, "display %s: data_base64 is not a base64 %s", d.MIME,
				strings.ToUpper(strings.TrimPrefix(d.MIME, "image/")))
		}
		return nil
	}
	if !hasData || hasB64 {
		return protoErr(errdefs.ErrInvalid, "display %s: needs data and no data_base64", d.MIME)
	}
	if d.Data[0] != form.first {
		return protoErr(errdefs.ErrInvalid, "display %s: data must be a JSON %s", d.MIME,
			map[byte]string{'"': "string", '{': "object"}[form.first])
	}
	return nil
}

func validateResult(r *Result) error {
	if err := CheckID(r.ID); err != nil {
		return err
	}
	if r.ExitCode < 0 || r.ExitCode > maxExitCode {
		return protoErr(errdefs.ErrInvalid, "result: exit_code %d outside 0..%d", r.ExitCode, maxExitCode)
	}
	if r.ExecutionCount < 1 || r.ExecutionCount > MaxExecutionCnt {
		return protoErr(errdefs.ErrInvalid, "result: execution_count %d outside 1..2^53-1", r.ExecutionCount)
	}
	if r.Exception != nil {
		if err := checkToken("result: exception type", r.Exception.Type, MaxTypeBytes, true); err != nil {
			return err
		}
	}
	return nil
}

// CheckID validates an exec id: 1 to MaxIDBytes of [A-Za-z0-9._:-]. The
// supervisor checks requests with it and the decoder checks frames.
func CheckID(id string) error {
	if id == "" || len(id) > MaxIDBytes {
		return protoErr(errdefs.ErrInvalid, "exec id must be 1 to %d bytes", MaxIDBytes)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return protoErr(errdefs.ErrInvalid, "exec id %.64q has a byte outside [A-Za-z0-9._:-]", id)
		}
	}
	return nil
}

// checkToken bounds a short printable field (no control characters).
func checkToken(what, s string, max int, allowSpace bool) error {
	if s == "" || len(s) > max {
		return protoErr(errdefs.ErrInvalid, "%s must be 1 to %d bytes", what, max)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (!allowSpace && r == ' ') {
			return protoErr(errdefs.ErrInvalid, "%s %.64q has a control character", what, s)
		}
	}
	return nil
}
