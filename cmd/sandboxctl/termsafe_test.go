package main

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

func TestTermSafe(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text", "hello, world\n", "hello, world\n"},
		{"tab and newline", "a\tb\nc\n", "a\tb\nc\n"},
		{"crlf kept", "line\r\n", "line\r\n"},
		{"utf-8 kept", "grüße ✓ 日本\n", "grüße ✓ 日本\n"},
		{"empty", "", ""},
		{"CSI clear screen", "\x1b[2J\x1b[H", `\x1b[2J\x1b[H`},
		{"color", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"OSC 52 clipboard", "\x1b]52;c;ZWNobyBwd25k\x07", `\x1b]52;c;ZWNobyBwd25k\x07`},
		{"OSC 8 hyperlink", "\x1b]8;;http://evil\x1b\\ok\x1b]8;;\x1b\\", `\x1b]8;;http://evil\x1b\ok\x1b]8;;\x1b\`},
		{"bare CR overwrites", "safe\rEVIL", `safe\rEVIL`},
		{"backspace", "abc\b\b\bxyz", `abc\x08\x08\x08xyz`},
		{"NUL and BEL", "\x00\x07", `\x00\x07`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI as UTF-8", "\u009b2J", `\u009b2J`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"raw 8-bit CSI byte", "a\x9b2J", `a\x9b2J`},
		{"invalid UTF-8", "\xff\xfe", `\xff\xfe`},
		{"truncated UTF-8", "a\xe2\x9c", `a\xe2\x9c`},
		{"bidi override", "access\u202e\u2066level", `access\u202e\u2066level`},
		{"RLM", "x\u200fy", `x\u200fy`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := termSafe(tc.in); got != tc.want {
				t.Errorf("termSafe(%q) = %q, want %q", tc.in, got, tc.want)
			}
			// The result is itself safe: escaping again changes nothing.
			if got := termSafe(tc.want); got != tc.want {
				t.Errorf("termSafe is not idempotent on %q: %q", tc.want, got)
			}
		})
	}
}

// TestWritePayloadNotATerminal: into a pipe or a buffer, bytes pass as they are.
func TestWritePayloadNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	writePayload(&buf, "\x1b[31mred\n")
	if buf.String() != "\x1b[31mred\n" {
		t.Fatalf("buffer got %q", buf.String())
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if isTerminal(w) {
		t.Fatal("a pipe is not a terminal")
	}
	w.Close()
}

// TestWritePayloadTerminal writes to a real pseudo-terminal and reads what
// the terminal would receive: the escape sequence arrives escaped.
func TestWritePayloadTerminal(t *testing.T) {
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	defer master.Close()
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	if !isTerminal(slave) {
		t.Fatal("a pty slave is a terminal")
	}
	writePayload(slave, "\x1b]52;c;aGk=\x07ok")
	want := `\x1b]52;c;aGk=\x07ok`
	buf := make([]byte, 256)
	got := ""
	for len(got) < len(want) {
		n, err := master.Read(buf)
		if err != nil {
			t.Fatalf("read master: %v (so far %q)", err, got)
		}
		got += string(buf[:n])
	}
	if got != want {
		t.Fatalf("the terminal received %q, want %q", got, want)
	}
}
