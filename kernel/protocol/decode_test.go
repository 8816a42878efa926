package protocol

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/errdefs"
)

var (
	tinyPNG  = base64.StdEncoding.EncodeToString(append(append([]byte{}, pngMagic...), "IHDR"...))
	tinyJPEG = base64.StdEncoding.EncodeToString([]byte{0xFF, 0xD8, 0xFF, 0xE0, 0, 0x10, 'J', 'F', 'I', 'F'})
)

func TestDecodeValid(t *testing.T) {
	cases := []struct {
		name, line string
		check      func(Frame) bool
	}{
		{"ready", `{"type":"ready","language":"python","version":"3.11.2"}`,
			func(f Frame) bool { r, ok := f.(*Ready); return ok && r.Version == "3.11.2" }},
		{"stream", `{"type":"stream","id":"e1","name":"stderr","data":"a\u0000b\n"}`,
			func(f Frame) bool { s, ok := f.(*Stream); return ok && s.Data == "a\x00b\n" && s.Name == "stderr" }},
		{"display text", `{"type":"display","id":"e1","mime":"text/plain","data":"42"}`,
			func(f Frame) bool { d, ok := f.(*Display); return ok && d.Text() == "42" }},
		{"display json", `{"type":"display","id":"e1","mime":"application/json","data":{"a":[1]}}`,
			func(f Frame) bool { d, ok := f.(*Display); return ok && string(d.Data) == `{"a":[1]}` }},
		{"display png", `{"type":"display","id":"e1","mime":"image/png","data_base64":"` + tinyPNG + `"}`,
			func(f Frame) bool { d, ok := f.(*Display); return ok && d.DataBase64 == tinyPNG }},
		{"display jpeg", `{"type":"display","id":"e1","mime":"image/jpeg","data_base64":"` + tinyJPEG + `"}`,
			func(f Frame) bool { d, ok := f.(*Display); return ok && d.DataBase64 == tinyJPEG && d.Text() == "" }},
		{"display markdown", `{"type":"display","id":"e1","mime":"text/markdown","data":"# T"}`,
			func(f Frame) bool { d, ok := f.(*Display); return ok && d.Text() == "# T" }},
		{"display latex", `{"type":"display","id":"e1","mime":"text/latex","data":"$x^2$"}`,
			func(f Frame) bool { d, ok := f.(*Display); return ok && d.Text() == "$x^2$" }},
		{"display plotly", `{"type":"display","id":"e1","mime":"application/vnd.plotly.v1+json","data":{"data":[],"layout":{}}}`,
			func(f Frame) bool {
				d, ok := f.(*Display)
				return ok && d.Text() == "" && string(d.Data) == `{"data":[],"layout":{}}`
			}},
		{"result", `{"type":"result","id":"e1","exit_code":3,"execution_count":2}`,
			func(f Frame) bool { r, ok := f.(*Result); return ok && r.ExitCode == 3 && r.ReturnValue == nil }},
		{"result null return", `{"type":"result","id":"e1","exit_code":0,"execution_count":1,"return_value":null}`,
			func(f Frame) bool { r, ok := f.(*Result); return ok && string(r.ReturnValue) == "null" }},
		{"result exception", `{"type":"result","id":"e1","exit_code":1,"execution_count":1,"exception":{"type":"ValueError","message":"m","traceback":"t"}}`,
			func(f Frame) bool { r, ok := f.(*Result); return ok && r.Exception.Type == "ValueError" }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewDecoder(strings.NewReader(tc.line + "\n")).Next()
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if !tc.check(f) {
				t.Fatalf("decoded %#v", f)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	cases := []struct{ name, input, want string }{
		{"garbage", "hello world\n", "not one JSON object"},
		{"empty line", "\n", "not one JSON object"},
		{"array", "[1]\n", "not one JSON object"},
		{"two objects", `{"type":"ready"}{"type":"ready"}` + "\n", "not one JSON object"},
		{"unknown type", `{"type":"exec","id":"e1"}` + "\n", "unknown frame type"},
		{"no type", `{"id":"e1"}` + "\n", `no string "type"`},
		{"unknown field", `{"type":"stream","id":"e1","name":"stdout","data":"x","extra":1}` + "\n", "unknown field"},
		{"case-folded field", `{"type":"stream","ID":"e1","name":"stdout","data":"x"}` + "\n", "unknown field"},
		{"duplicate field", `{"type":"stream","id":"e1","id":"e2","name":"stdout","data":"x"}` + "\n", "duplicate field"},
		{"unknown nested field", `{"type":"result","id":"e1","exit_code":1,"execution_count":1,"exception":{"type":"E","message":"","traceback":"","x":1}}` + "\n", "unknown field"},
		{"missing field", `{"type":"stream","id":"e1","name":"stdout"}` + "\n", `lacks field "data"`},
		{"null field", `{"type":"stream","id":null,"name":"stdout","data":"x"}` + "\n", "is null"},
		{"wrong type", `{"type":"stream","id":1,"name":"stdout","data":"x"}` + "\n", "cannot unmarshal"},
		{"invalid utf8", "{\"type\":\"stream\",\"id\":\"e1\",\"name\":\"stdout\",\"data\":\"\xff\"}\n", "UTF-8"},
		{"nul byte", "{\"type\":\"stream\",\"id\":\"e1\",\"name\":\"stdout\",\"data\":\"\x00\"}\n", "NUL"},
		{"bad stream name", `{"type":"stream","id":"e1","name":"stdlog","data":"x"}` + "\n", "unknown name"},
		{"bad id", `{"type":"stream","id":"../x","name":"stdout","data":"x"}` + "\n", "outside [A-Za-z0-9._:-]"},
		{"exit code range", `{"type":"result","id":"e1","exit_code":256,"execution_count":1}` + "\n", "exit_code"},
		{"exit code float", `{"type":"result","id":"e1","exit_code":1.5,"execution_count":1}` + "\n", "cannot unmarshal"},
		{"execution count", `{"type":"result","id":"e1","exit_code":0,"execution_count":0}` + "\n", "execution_count"},
		{"png not png", `{"type":"display","id":"e1","mime":"image/png","data_base64":"aGVsbG8="}` + "\n", "not a base64 PNG"},
		{"jpeg not jpeg", `{"type":"display","id":"e1","mime":"image/jpeg","data_base64":"` + tinyPNG + `"}` + "\n", "not a base64 JPEG"},
		{"jpeg with data", `{"type":"display","id":"e1","mime":"image/jpeg","data":"x"}` + "\n", "needs data_base64"},
		{"markdown not string", `{"type":"display","id":"e1","mime":"text/markdown","data":{}}` + "\n", "JSON string"},
		{"latex as base64", `{"type":"display","id":"e1","mime":"text/latex","data_base64":"` + tinyPNG + `"}` + "\n", "needs data and no data_base64"},
		{"plotly not object", `{"type":"display","id":"e1","mime":"application/vnd.plotly.v1+json","data":"{}"}` + "\n", "JSON object"},
		{"png with data", `{"type":"display","id":"e1","mime":"image/png","data":"x"}` + "\n", "needs data_base64"},
		{"json not object", `{"type":"display","id":"e1","mime":"application/json","data":"x"}` + "\n", "JSON object"},
		{"html not string", `{"type":"display","id":"e1","mime":"text/html","data":{}}` + "\n", "JSON string"},
		{"unknown mime", `{"type":"display","id":"e1","mime":"application/x-sh","data":"x"}` + "\n", "unknown mime"},
		{"bad language", `{"type":"ready","language":"ruby","version":"3"}` + "\n", "unknown language"},
		{"truncated", `{"type":"ready"`, "channel closed inside a frame"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(strings.NewReader(tc.input))
			_, err := d.Next()
			if err == nil || !errors.Is(err, ErrProtocol) || !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("Next = %v, want a protocol error of class invalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
			if _, again := d.Next(); again == nil || again.Error() != err.Error() {
				t.Fatalf("decoder recovered after a protocol error: %v", again)
			}
		})
	}
}

func TestDecodeEOF(t *testing.T) {
	d := NewDecoder(strings.NewReader(`{"type":"ready","language":"javascript","version":"v20.20.2"}` + "\n"))
	if _, err := d.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("second Next = %v, want io.EOF", err)
	}
}

// endless yields n bytes of 'a' without ever holding them.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	for i := range p {
		p[i] = 'a'
	}
	e.n -= int64(len(p))
	return len(p), nil
}

// A 1 GiB line must fail after MaxFrameBytes with bounded memory: the
// decoder stops reading there instead of buffering the stream.
func TestDecodeOverLongLine(t *testing.T) {
	src := &endless{n: 1 << 30}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := NewDecoder(src).Next()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrProtocol) || !errors.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("Next = %v, want a too-large protocol error", err)
	}
	consumed := int64(1<<30) - src.n
	if consumed > MaxFrameBytes+2*readChunk {
		t.Fatalf("decoder read %d bytes of an over-long line, limit %d", consumed, MaxFrameBytes)
	}
	// The line buffer doubles up to the limit: at most 2x the limit in all.
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 2*MaxFrameBytes+1<<20 {
		t.Fatalf("decoder allocated %d bytes for a %d-byte limit", grew, MaxFrameBytes)
	}
	t.Logf("read %d bytes, allocated %d MiB", consumed, (after.TotalAlloc-before.TotalAlloc)>>20)
}

// A frame of exactly MaxFrameBytes is accepted.
func TestDecodeAtLimit(t *testing.T) {
	head := `{"type":"stream","id":"e1","name":"stdout","data":"`
	pad := MaxFrameBytes - len(head) - 2
	line := head + strings.Repeat("x", pad) + `"}` + "\n"
	f, err := NewDecoder(strings.NewReader(line)).Next()
	if err != nil {
		t.Fatalf("Next at the limit: %v", err)
	}
	if n := len(f.(*Stream).Data); n != pad {
		t.Fatalf("data %d bytes, want %d", n, pad)
	}
	over := head + strings.Repeat("x", pad+1) + `"}` + "\n"
	if _, err := NewDecoder(strings.NewReader(over)).Next(); !errors.Is(err, errdefs.ErrTooLarge) {
		t.Fatalf("Next one byte over = %v", err)
	}
}

func FuzzDecode(f *testing.F) {
	seeds := []string{
		`{"type":"ready","language":"python","version":"3"}`,
		`{"type":"stream","id":"e1","name":"stdout","data":"x"}`,
		`{"type":"display","id":"e1","mime":"application/json","data":{"a":1}}`,
		`{"type":"result","id":"e1","exit_code":0,"execution_count":1,"return_value":[1,"x"]}`,
		"\xff\x00{}", `{"type":"stream","id":"e1","id":"e1"}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s + "\n"))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		d := NewDecoder(bytes.NewReader(in))
		for i := 0; i < 64; i++ {
			fr, err := d.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) && !errors.Is(err, ErrProtocol) {
					t.Fatalf("error outside the taxonomy: %v", err)
				}
				return
			}
			if err := validate(fr); err != nil {
				t.Fatalf("accepted an invalid frame %#v: %v", fr, err)
			}
		}
	})
}

// TestDisplayTypesMatchAPI: the decoder accepts exactly the display types
// the API documents (a type the API lists but the decoder refuses would
// kill every kernel that sends it; one the decoder passes but the API does
// not list would reach callers undocumented).
func TestDisplayTypesMatchAPI(t *testing.T) {
	want := api.DisplayMIMEs()
	var got []string
	for mime := range displayForms {
		got = append(got, mime)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("decoder display types %v, api %v", got, want)
	}
}
