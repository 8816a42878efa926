package supervisor

import (
	"regexp"
	"strings"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/launch"
)

// A process-mode exec without an entrypoint runs as a plain interpreter
// (fds 0-2 only, pipe-speed output: I3/I4 fidelity), so no runner reports
// its exception. The supervisor derives one from the end of the captured
// stderr instead, when the exit status is non-zero and that end is the
// runtime's own report of an uncaught exception. The payload writes its
// own stderr, so it can forge this object, but only in its own result: the
// parser only reads the exec's captured output, bounded, and never panics.

// exceptionWindow is how much of the end of stderr the parser reads: an
// uncaught-exception report is the last thing an interpreter writes, and a
// bound keeps the parse linear in a small input whatever the output limit.
const exceptionWindow = 64 << 10

// deriveException sets res.Exception from res.Stderr for a process-mode
// python or javascript exec that exited non-zero without one.
func deriveException(runtime string, res *launch.ExecResult) {
	if res == nil || res.Exception != nil || res.TimedOut || res.Signal != nil ||
		res.ExitCode == nil || *res.ExitCode == 0 {
		return
	}
	tail := res.Stderr
	if len(tail) > exceptionWindow {
		tail = strings.ToValidUTF8(tail[len(tail)-exceptionWindow:], "")
	}
	switch runtime {
	case "python":
		res.Exception = pythonException(tail)
	case "javascript":
		res.Exception = nodeException(tail)
	}
}

const pyHeader = "Traceback (most recent call last):"

// pyChainSeparators are the lines CPython prints between the reports of
// chained exceptions (__cause__, __context__), each with a blank line
// before and after it.
var pyChainSeparators = []string{
	"\n\nThe above exception was the direct cause of the following exception:\n\n",
	"\n\nDuring handling of the above exception, another exception occurred:\n\n",
}

// pyExcLine is the exception line ending a CPython traceback: the type,
// module-qualified unless builtins or __main__, then ": message" unless
// the message is empty.
var pyExcLine = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)(?:: (.*))?$`)

// pythonException parses the last "Traceback (most recent call last):"
// report at the end of s: frame lines (indented), then the exception line
// and any further lines of its message (a multi-line message, notes).
// SyntaxError's report has the same shape (its frame shows the caret). A
// chain of exceptions is kept whole in the traceback; type and message are
// the last one's, as the interpreter's exit is.
func pythonException(s string) *api.Exception {
	s = strings.TrimRight(s, "\n")
	start := lastLineIndex(s, pyHeader)
	if start < 0 {
		return nil
	}
	lines := strings.Split(s[start+len(pyHeader):], "\n")[1:]
	frames := 0
	for frames < len(lines) && strings.HasPrefix(lines[frames], "  ") {
		frames++
	}
	if frames == 0 || frames == len(lines) || !strings.HasPrefix(lines[0], "  File ") {
		return nil
	}
	m := pyExcLine.FindStringSubmatch(lines[frames])
	if m == nil {
		return nil
	}
	typ := m[1][strings.LastIndexByte(m[1], '.')+1:] // the kernel reports type(e).__name__
	msg := strings.Join(append([]string{m[2]}, lines[frames+1:]...), "\n")
	return &api.Exception{Type: typ, Message: msg, Traceback: s[pyChainStart(s, start):] + "\n"}
}

// pyChainStart walks back from the report at start over the reports
// chained before it.
func pyChainStart(s string, start int) int {
	for {
		prev := -1
		for _, sep := range pyChainSeparators {
			if strings.HasSuffix(s[:start], sep) {
				prev = lastLineIndex(s[:start-len(sep)], pyHeader)
			}
		}
		if prev < 0 {
			return start
		}
		start = prev
	}
}

// lastLineIndex is the index of the last line of s that is exactly line.
func lastLineIndex(s, line string) int {
	for end := len(s); end > 0; {
		i := strings.LastIndex(s[:end], line)
		if i < 0 {
			return -1
		}
		after := i + len(line)
		if (i == 0 || s[i-1] == '\n') && (after == len(s) || s[after] == '\n') {
			return i
		}
		end = i
	}
	return -1
}

// nodeTrailer is what node (>= 18) prints last when an uncaught exception
// ends the process.
var nodeTrailer = regexp.MustCompile(`\n\nNode\.js v[0-9][0-9A-Za-z.\-]*$`)

// nodeErrLine is the first line of an Error's stack: its name, node's
// error code in brackets for node's own errors, then ": message" unless
// the message is empty.
var nodeErrLine = regexp.MustCompile(`^([A-Za-z_$][A-Za-z0-9_$]*)(?: \[[A-Z0-9_]+\])?(?:: (.*))?$`)

// nodeException parses node's report of an uncaught Error or rejection:
// "file:line", the source line, a caret line, a blank line, then
// util.inspect(error) (its stack, "Name: message" then "    at ..."
// frames, then any own properties in braces), a blank line and the
// "Node.js vX" trailer. A thrown value that is not an Error has no stack
// and gets no exception object.
func nodeException(s string) *api.Exception {
	s = strings.TrimRight(s, "\n")
	loc := nodeTrailer.FindStringIndex(s)
	if loc == nil {
		return nil
	}
	body := s[:loc[0]]
	caret := strings.LastIndex(body, "^\n\n")
	if caret < 0 {
		return nil
	}
	lineStart := strings.LastIndexByte(body[:caret], '\n') + 1
	if strings.TrimLeft(body[lineStart:caret], " ") != "" {
		return nil // not node's caret line
	}
	block := body[caret+3:]
	lines := strings.Split(block, "\n")
	m := nodeErrLine.FindStringSubmatch(lines[0])
	if m == nil {
		return nil
	}
	at := 1
	for at < len(lines) && !strings.HasPrefix(lines[at], "    at ") {
		at++ // the message's further lines
	}
	if at == len(lines) {
		return nil // no stack frames: not an Error's stack
	}
	msg := strings.Join(append([]string{m[2]}, lines[1:at]...), "\n")
	return &api.Exception{Type: m[1], Message: msg, Traceback: block + "\n"}
}
