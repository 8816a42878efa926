package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

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

// openPty returns a pseudo-terminal: the master end (what the terminal
// emulator reads) and the slave end (what a program writes to).
func openPty(t *testing.T) (master, slave *os.File) {
	t.Helper()
	// Non-blocking, so that os.NewFile puts it in the poller and a read
	// deadline works: a missing byte must fail the test, not hang it.
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// readPty reads from the master until it has n bytes.
func readPty(t *testing.T, master *os.File, n int) string {
	t.Helper()
	buf := make([]byte, 4096)
	got := ""
	if err := master.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for len(got) < n {
		k, err := master.Read(buf)
		if err != nil {
			t.Fatalf("read the terminal: %v (so far %q)", err, got)
		}
		got += string(buf[:k])
	}
	return got
}

// TestWritePayloadTerminal writes to a real pseudo-terminal and reads what
// the terminal would receive: the escape sequence arrives escaped.
func TestWritePayloadTerminal(t *testing.T) {
	master, slave := openPty(t)
	if !isTerminal(slave) {
		t.Fatal("a pty slave is a terminal")
	}
	writePayload(slave, "\x1b]52;c;aGk=\x07ok")
	want := `\x1b]52;c;aGk=\x07ok`
	if got := readPty(t, master, len(want)); got != want {
		t.Fatalf("the terminal received %q, want %q", got, want)
	}
}

// TestRunEscapesOnTerminal: `sandboxctl run` against a real server, its
// stdout and stderr a terminal; the payload's escape sequences (clear the
// screen, set the window title) reach the terminal escaped.
func TestRunEscapesOnTerminal(t *testing.T) {
	sock := serve(t, &launcher{fn: exited(0, "\x1b[2Jout", "\x1b]0;pwned\x07err")}, ready())
	outM, outS := openPty(t)
	errM, errS := openPty(t)
	lookup := func(k string) (string, bool) {
		if k == "SANDBOXD_SOCKET" {
			return sock, true
		}
		return "", false
	}
	code := run(context.Background(), []string{"run", "--lang", "python", "-c", "print(1)"},
		stdio{in: strings.NewReader(""), out: outS, err: errS}, lookup)
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if got, want := readPty(t, outM, len(`\x1b[2Jout`)), `\x1b[2Jout`; got != want {
		t.Errorf("terminal stdout got %q, want %q", got, want)
	}
	if got, want := readPty(t, errM, len(`\x1b]0;pwned\x07err`)), `\x1b]0;pwned\x07err`; got != want {
		t.Errorf("terminal stderr got %q, want %q", got, want)
	}
}
