package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"
)

func TestCapturedStreamDrain(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB, many 64 KiB chunks
	tests := []struct {
		name          string
		limit         int64
		input         []byte
		wantTruncated bool
	}{
		{"empty", 10, nil, false},
		{"under the limit", 10, []byte("hello"), false},
		{"exactly the limit", 10, []byte("0123456789"), false},
		{"one over the limit", 10, []byte("0123456789X"), true},
		{"far over the limit", 10, big, true},
		{"zero limit, no output", 0, nil, false},
		{"zero limit, one byte", 0, []byte("x"), true},
		{"limit of 64 KiB, exactly", 64 << 10, big[:64<<10], false},
		{"limit of 64 KiB, one more", 64 << 10, big[:64<<10+1], true},
		{"limit across chunk boundaries", 100000, big, true},
		{"limit larger than the stream", 2 << 20, big, false},
		{"limit 256 KiB, 1 MiB", 256 << 10, big, true},
	}
	readers := map[string]func([]byte) io.Reader{
		"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
		"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
		"half":     func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
		"data+EOF": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
	}
	for _, tc := range tests {
		for rname, mk := range readers {
			if rname == "one byte" && len(tc.input) > 200000 {
				continue // slow and says nothing more
			}
			t.Run(tc.name+"/"+rname, func(t *testing.T) {
				c := capturedStream{limit: tc.limit}
				c.drain(mk(tc.input))
				checkKept(t, &c, tc.input)
				if c.total != int64(len(tc.input)) {
					t.Fatalf("total %d, want %d", c.total, len(tc.input))
				}
				if c.truncated != tc.wantTruncated {
					t.Fatalf("truncated = %v, want %v (limit %d, total %d)", c.truncated, tc.wantTruncated, tc.limit, c.total)
				}
			})
		}
	}
}

// checkKept asserts the head + marker + tail contract for one stream.
func checkKept(t *testing.T, c *capturedStream, input []byte) {
	t.Helper()
	got := c.Bytes()
	if int64(len(input)) <= c.limit {
		if !bytes.Equal(got, input) {
			t.Fatalf("kept %d bytes of a %d-byte stream under the limit %d: want all of it", len(got), len(input), c.limit)
		}
		return
	}
	head := input[:c.limit/2]
	if !bytes.HasPrefix(got, head) {
		t.Fatalf("output does not start with the stream's first %d bytes", len(head))
	}
	if i := bytes.Index(got, []byte("[... sandboxd: ")); i < 0 {
		if int64(len(got)) > c.limit || !bytes.Equal(got, input[:len(got)]) {
			t.Fatalf("no marker and not a plain head: %q", got)
		}
		return // a limit too small for a marker
	}
	if int64(len(got)) != c.limit {
		t.Fatalf("kept %d bytes, want exactly the limit %d", len(got), c.limit)
	}
	end := got[bytes.LastIndex(got, []byte("...]\n"))+5:]
	if !bytes.HasSuffix(input, end) {
		t.Fatalf("the last %d bytes kept are not the stream's tail", len(end))
	}
	var cut int64
	if _, err := fmt.Sscanf(string(got[len(head):]), "\n[... sandboxd: %d bytes cut", &cut); err != nil {
		t.Fatalf("marker unreadable: %v", err)
	}
	if int64(len(head))+cut+int64(len(end)) != int64(len(input)) {
		t.Fatalf("head %d + cut %d + tail %d != stream %d", len(head), cut, len(end), len(input))
	}
}

func TestCapturedStreamDrainStopsOnError(t *testing.T) {
	boom := errors.New("boom")
	c := capturedStream{limit: 4}
	c.drain(io.MultiReader(strings.NewReader("abcdef"), iotest.ErrReader(boom), strings.NewReader("never read")))
	if string(c.head) != "ab" || c.total != 6 || !c.truncated {
		t.Fatalf("after an error: head %q total %d truncated %v", c.head, c.total, c.truncated)
	}
}

// drain reads to EOF however little it keeps, so a payload writing far more
// than the limit never blocks on a full pipe.
func TestCapturedStreamDrainsPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	const size = 4 << 20
	done := make(chan error, 1)
	go func() {
		_, err := w.Write(bytes.Repeat([]byte("y"), size))
		w.Close()
		done <- err
	}()
	c := capturedStream{limit: 1024}
	finished := make(chan struct{})
	go func() { c.drain(r); close(finished) }()
	select {
	case <-finished:
	case <-time.After(30 * time.Second):
		t.Fatal("drain did not return: the writer is blocked")
	}
	if err := <-done; err != nil {
		t.Fatalf("writer: %v", err)
	}
	if c.total != size || len(c.Bytes()) != 1024 || !c.truncated {
		t.Fatalf("total %d kept %d truncated %v", c.total, len(c.Bytes()), c.truncated)
	}
}

func TestCapturedStreamString(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		in    string
		want  string
	}{
		{"ascii", 100, "hello\n", "hello\n"},
		{"valid UTF-8", 100, "héllo wörld ✓", "héllo wörld ✓"},
		{"invalid byte", 100, "a\xffb", "a\uFFFDb"},
		{"invalid run becomes one replacement", 100, "a\xff\xfe\xfdb", "a\uFFFDb"},
		{"NUL kept", 100, "a\x00b", "a\x00b"},
		// A limit too small for the marker keeps the head half alone.
		{"limit too small for a marker", 2, "héllo", "h"},
		// The head/tail boundary cuts "é" (2 bytes) in half.
		{"rune cut at the head", 40, "h" + strings.Repeat("é", 40), "h" + strings.Repeat("é", 9) + "\uFFFD"},
		{"empty", 100, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := capturedStream{limit: tc.limit}
			c.drain(strings.NewReader(tc.in))
			got := c.String()
			if got != tc.want {
				t.Fatalf("String() = %q, want %q", got, tc.want)
			}
			if !utf8.ValidString(got) {
				t.Fatalf("String() = %q is not valid UTF-8", got)
			}
		})
	}
}

func TestCapturedStreamHead(t *testing.T) {
	c := capturedStream{limit: 10}
	c.drain(strings.NewReader("0123456789"))
	tests := []struct {
		n    int
		want string
	}{
		{0, ""},
		{1, "0"},
		{5, "01234"},
		{10, "0123456789"},
		{11, "0123456789"}, // never beyond what was kept
		{1 << 20, "0123456789"},
	}
	for _, tc := range tests {
		if got := c.Head(tc.n); got != tc.want {
			t.Errorf("Head(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	var empty capturedStream
	if empty.Head(300) != "" || empty.String() != "" {
		t.Error("zero capturedStream is not empty")
	}
}
