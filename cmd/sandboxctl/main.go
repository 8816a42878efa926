// Command sandboxctl is the CLI of sandboxd, for callers and operators: it
// runs code and manages sessions and files through the supervisor's API
// (package client owns the wire protocol), reads and verifies the audit log
// (package audit), checks a host (package doctor), and does the operator's
// set-up chores (`admin`, e.g. delegating cgroup directories). It owns the
// arguments, the output and the exit codes.
//
// It must never talk to a supervisor but through its socket or the --url
// of its TCP listener, never run the code it is given itself, never grant
// itself a privilege (what it changes as root, it changes because the
// operator ran it as root), and never write a returned artifact outside the
// directory it was asked to write into.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/sandboxd/sandboxd/client"
)

// Exit codes of sandboxctl itself. Payload exit codes (0..255) pass through
// unchanged, so these overlap with them by design; use --json to tell them
// apart for certain.
const (
	exitOK          = 0
	exitNotReady    = 1   // health: the host cannot sandbox right now
	exitUsage       = 2   // bad arguments, or the API refused the request
	exitUnreachable = 3   // the supervisor could not be reached or answered nonsense
	exitTimedOut    = 124 // the payload ran past its timeout (as timeout(1))
	exitSignalBase  = 128 // + signal number, as a shell reports it
)

const helpText = `sandboxctl — client of sandboxd, the privilege-separated code sandbox.

Usage:
  sandboxctl run [--lang python|javascript|shell] (-c CODE | FILE | -) [options]
  sandboxctl health [--json] [--socket PATH]
  sandboxctl doctor [--json] [--helper PATH] [--helper-config PATH] [--socket PATH] [--allow-no-cgroups]
  sandboxctl doctor --url URL [--api-key-file F] [--ca-file F] [--client-cert F --client-key F] [--json]
                      from another machine: the connection, TLS, /healthz,
                      the key and the supervisor's readiness checks; the
                      host checks are local-only
  sandboxctl session create [--ttl SECONDS] [--key KEY] [--json]
  sandboxctl session list|show ID|rm ID [--json]
  sandboxctl session exec ID [run options] (-c CODE | FILE | -)
  sandboxctl files put SESSION WORKSPACE_PATH (LOCAL_FILE | -)
  sandboxctl files get SESSION WORKSPACE_PATH [LOCAL_FILE]
  sandboxctl files ls SESSION [--json] | rm SESSION WORKSPACE_PATH
  sandboxctl admin settings get | set KEY=VALUE...   (live limits; admins only)
  sandboxctl admin helper-config --workspace-root DIR --shim PATH --profile PATH
  sandboxctl admin env-register --name NAME --language LANG [--root DIR] [--env K=V]... [--package N=V]... [--default]
  sandboxctl env build NAME --language python --requirements FILE (--index URL | --find-links DIR)
  sandboxctl env build NAME --language javascript --lockfile FILE [--registry URL]
                      build a pinned environment in a sandbox (root; the
                      supervisor running) and register it (docs/ENVIRONMENTS.md)
  sandboxctl env ls|show NAME|rm NAME [--json] [--helper-config PATH]
  sandboxctl audit verify [--json] [--partial] [FILE...]
  sandboxctl audit show EXEC_ID [--log FILE] [--json]
  sandboxctl mcp [--socket PATH | --url URL --api-key-file F [--ca-file F]]
                      serve the Model Context Protocol on stdin/stdout (tools
                      run_code, create_session, upload_file, download_file,
                      list_files, delete_session) for an AI agent
  sandboxctl help

run options:
  --lang L            python, javascript or shell; inferred from FILE's
                      extension (.py, .js, .mjs, .cjs, .sh) when not given
  -c CODE             the program text
  FILE | -            read the program from FILE, or from standard input
  --json              print the result object instead of the payload's output
  --timeout MS        exec timeout in milliseconds (default: the server's, 30000)
  --env NAME=VALUE    set an environment variable of the payload (repeatable);
                      --env NAME passes sandboxctl's own value of NAME
  --stdin-file F      feed F to the payload's standard input ("-" for
                      sandboxctl's standard input, unless the code comes from it);
                      without it the payload's stdin is empty
  --file WS=LOCAL     stage the local file LOCAL at WS in /workspace (repeatable)
  --artifact GLOB     collect files matching GLOB in /workspace after the run
                      (repeatable)
  --artifacts-dir D   write collected artifacts, and displays (figures,
                      HTML tables...) as display-ID-N.EXT, below directory D
  --mode M            kernel (a session's default for python and javascript:
                      the session's long-lived interpreter) or process
  --entrypoint F      call function F after the code (a code node); its
                      JSON return value is printed
  --inputs JSON       the entrypoint's inputs, one JSON object
  --no-stream         wait for the whole result; by default output is
                      streamed as it happens when stdout is a terminal
  --stream            stream even when stdout is not a terminal
  --network MODE      none (default) or egress: only the operator's allowlist,
                      through the supervisor's proxy (--json shows each connection)
  --socket PATH       supervisor socket (default $SANDBOXD_SOCKET, else
                      /run/sandboxd/sandboxd.sock)
  --url URL           reach a TCP listener instead: https://HOST:PORT (default
                      $SANDBOXD_URL); every command that talks to sandboxd
                      takes these connection flags
  --api-key-file F    the API key, first line of F (default
                      $SANDBOXD_API_KEY_FILE; else the key in $SANDBOXD_API_KEY)
  --ca-file F         PEM CA bundle that signed the server's certificate
                      (default $SANDBOXD_CA_FILE; else the system roots)
  --client-cert F, --client-key F
                      client certificate for a supervisor with --tls-client-ca

audit (reads the log files; the supervisor's user or root can read them):
  verify [FILE...]    check the hash chain of the audit log ending in FILE
                      (default $SANDBOXD_AUDIT_LOG, else audit.log in
                      $SANDBOXD_STATE_DIR or /var/lib/sandboxd), following
                      its links back through the rotated files; keep FILE.head
                      beside FILE. Names the first broken point.
  --partial           accept a start at a pruned rotated file, or after a file
                      the supervisor set aside as broken (says what was skipped)
  show EXEC_ID        the launch story of one exec (a unique id prefix will do):
                      what was asked, decided, each helper step and its facts,
                      the outcome; --log FILE picks the log
  --json              the report or the records as JSON

The payload's stdout goes to stdout and its stderr to stderr; notes from
sandboxctl itself (truncation, timeout, signal) go to stderr, prefixed
"sandboxctl:".

Exit status:
  run      the payload's exit code (0..255);
           124 when it timed out;
           128+N when it was killed by signal N (137 = SIGKILL, e.g. out of memory);
           the same with --json.
  health   0 ready, 1 not ready.
  audit    0 the log verifies (show: and the exec was found in it);
           1 it does not (or the exec is not in it); the break is printed.
  doctor   0 no check failed (warnings allowed), 1 a check failed; each
           failing check prints its fix. It checks the host and the
           installation (user namespaces, bwrap, the helper's file
           capabilities, its config and profiles, seccomp, cgroups, the
           runtimes) and, when it answers on --socket, the running
           supervisor (no_new_privs, capability bounding set).
  any      2 usage error, or the API refused the request; stderr then says
             "sandboxctl: <code>: <message>" with the API's error code;
           3 the supervisor could not be reached or its answer made no sense.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], stdio{in: os.Stdin, out: os.Stdout, err: os.Stderr}, os.LookupEnv)
	stop()
	os.Exit(code)
}

type stdio struct {
	in       io.Reader
	out, err io.Writer
}

// run is sandboxctl without the process around it, for tests.
func run(ctx context.Context, args []string, io stdio, lookupEnv func(string) (string, bool)) int {
	if len(args) == 0 {
		fmt.Fprint(io.err, helpText)
		return exitUsage
	}
	switch args[0] {
	case "run":
		return cmdRun(ctx, args[1:], io, lookupEnv)
	case "health":
		return cmdHealth(ctx, args[1:], io, lookupEnv)
	case "doctor":
		return cmdDoctor(ctx, args[1:], io, lookupEnv)
	case "admin":
		if len(args) > 1 && args[1] == "settings" {
			return cmdAdminSettings(ctx, args[2:], io, lookupEnv)
		}
		return cmdAdmin(args[1:], io)
	case "env":
		return cmdEnv(ctx, args[1:], io, lookupEnv)
	case "audit":
		return cmdAudit(args[1:], io, lookupEnv)
	case "session":
		return cmdSession(ctx, args[1:], io, lookupEnv)
	case "files":
		return cmdFiles(ctx, args[1:], io, lookupEnv)
	case "mcp":
		return cmdMCP(ctx, args[1:], io, lookupEnv)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(io.out, helpText)
		return exitOK
	default:
		fmt.Fprintf(io.err, "sandboxctl: unknown command %q; see \"sandboxctl help\"\n", args[0])
		return exitUsage
	}
}

func defaultSocket(lookupEnv func(string) (string, bool)) string {
	if s, _ := lookupEnv("SANDBOXD_SOCKET"); s != "" {
		return s
	}
	return client.DefaultSocket
}

// parseInterspersed parses flags that may come before or after positional
// arguments ("run script.py --json"), which the flag package alone does not
// allow. "--" ends flag parsing; "-" is a positional argument.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stopped at a positional argument, or after "--".
		consumed := len(args) - len(rest)
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// fail reports an error of sandboxctl or of the API and returns the exit code.
func fail(w io.Writer, err error) int {
	var apiErr *client.APIError
	if errors.As(err, &apiErr) {
		msg := apiErr.Message
		if apiErr.RetryAfter != "" {
			msg += " (retry after " + apiErr.RetryAfter + " s)"
		}
		fmt.Fprintf(w, "sandboxctl: %s: %s\n", apiErr.Code, msg)
		return exitUsage
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(w, "sandboxctl: interrupted")
		return exitSignalBase + int(syscall.SIGINT)
	}
	fmt.Fprintf(w, "sandboxctl: %v\n", err)
	return exitUnreachable
}

func usage(w io.Writer, format string, args ...any) int {
	fmt.Fprintf(w, "sandboxctl: %s\n", fmt.Sprintf(format, args...))
	fmt.Fprintln(w, "see \"sandboxctl help\"")
	return exitUsage
}

// multiFlag collects a repeatable flag's values.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
