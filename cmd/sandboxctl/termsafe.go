package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// Payload output is untrusted bytes. Written raw to an operator's terminal,
// escape sequences in it act on the terminal: OSC 52 sets the clipboard,
// OSC 8 hides link targets, CSI sequences move the cursor, clear the screen
// or redraw earlier lines (so the output can fake sandboxctl's own notes or
// a shell prompt), and some terminals have had code-execution bugs in
// their escape parsers (e.g. CVE-2022-45063 in xterm's OSC 50, CVE-2003-0063
// title reporting). So when stdout or stderr is a terminal, sandboxctl shows
// every control character visibly instead of sending it. Into a pipe or a
// file the bytes pass unchanged: there the consumer decides.

// termSafe returns s with everything a terminal would interpret, other than
// newline and tab, replaced by a visible escape: C0 controls and DEL as
// \xNN (ESC is \x1b), a carriage return not followed by a newline as \r
// (it lets later text overwrite a line), C1 controls (U+0080-U+009F; CSI is
// U+009B) and Unicode bidirectional overrides and isolates (which reorder
// what is shown, "Trojan Source", CVE-2021-42574) as \uNNNN, and every
// byte that is not valid UTF-8 as \xNN (a terminal in an 8-bit mode takes a
// lone 0x9B for CSI).
func termSafe(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r':
			if strings.HasPrefix(s[i+1:], "\n") {
				b.WriteByte('\r')
			} else {
				b.WriteString(`\r`)
			}
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case r >= 0x80 && r <= 0x9f, isBidiControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// isBidiControl: the explicit directional embeddings, overrides and
// isolates (Unicode UAX #9), plus the marks that can reorder text.
func isBidiControl(r rune) bool {
	return (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) ||
		r == 0x200e || r == 0x200f || r == 0x061c
}

// isTerminal reports whether w is a terminal (an *os.File the tty driver
// answers TCGETS for).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// writePayload writes untrusted payload text to w, escaped when w is a
// terminal and unchanged otherwise.
func writePayload(w io.Writer, s string) {
	if isTerminal(w) {
		s = termSafe(s)
	}
	_, _ = io.WriteString(w, s)
}
