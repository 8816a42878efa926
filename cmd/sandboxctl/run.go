package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/client"
)

// runOpts are the flags of `sandboxctl run` (and `session exec`).
type runOpts struct {
	lang, code, stdinFile, artifactsDir string
	asJSON, noStream, forceStream       bool
	mode, entrypoint, inputs, network   string
	session                             string // set by `sandboxctl session exec ID`
	timeout                             int64
	envs, files, artifacts              multiFlag
	conn                                *connFlags
	codeSet                             bool // -c was given
	pos                                 []string
}

func cmdRun(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	o, err := parseRunFlags(args, lookupEnv)
	if err != nil {
		return usage(sio.err, "%v", err)
	}
	codeFromStdin, err := o.readCode(sio)
	if err != nil {
		return usage(sio.err, "%v", err)
	}
	req, err := o.request(sio, codeFromStdin, lookupEnv)
	if err != nil {
		return usage(sio.err, "%v", err)
	}
	cl, err := o.conn.client()
	if err != nil {
		return usage(sio.err, "%v", err)
	}
	stream := !o.noStream && !o.asJSON && (o.forceStream || isTerminal(sio.out))
	res, raw, streamed, err := execute(ctx, cl, o.session, req, stream, sio)
	if err != nil {
		return fail(sio.err, err)
	}
	return report(res, raw, streamed, o.asJSON, o.artifactsDir, sio)
}

// parseRunFlags parses run's flags; the positional arguments are kept.
func parseRunFlags(args []string, lookupEnv func(string) (string, bool)) (*runOpts, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o := &runOpts{timeout: -1}
	fs.StringVar(&o.lang, "lang", "", "")
	fs.StringVar(&o.code, "c", "", "")
	fs.BoolVar(&o.asJSON, "json", false, "")
	fs.Int64Var(&o.timeout, "timeout", -1, "")
	o.conn = addConnFlags(fs, lookupEnv)
	fs.Var(&o.envs, "env", "")
	fs.StringVar(&o.stdinFile, "stdin-file", "", "")
	fs.Var(&o.files, "file", "")
	fs.Var(&o.artifacts, "artifact", "")
	fs.StringVar(&o.artifactsDir, "artifacts-dir", "", "")
	fs.StringVar(&o.mode, "mode", "", "")
	fs.StringVar(&o.entrypoint, "entrypoint", "", "")
	fs.StringVar(&o.inputs, "inputs", "", "")
	fs.BoolVar(&o.noStream, "no-stream", false, "")
	fs.BoolVar(&o.forceStream, "stream", false, "")
	fs.StringVar(&o.network, "network", "", "")
	fs.StringVar(&o.session, "session", "", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, fmt.Errorf("run: %w", err)
	}
	o.pos = pos
	fs.Visit(func(f *flag.Flag) { o.codeSet = o.codeSet || f.Name == "c" })
	return o, nil
}

// readCode takes the program from exactly one of -c, FILE, "-", and the
// language from FILE's extension unless --lang says it.
func (o *runOpts) readCode(sio stdio) (fromStdin bool, err error) {
	switch {
	case o.codeSet && len(o.pos) > 0:
		return false, errors.New("run: give the code with -c or as FILE, not both")
	case !o.codeSet && len(o.pos) == 0:
		return false, errors.New("run: no code; give -c CODE, a FILE, or - for standard input")
	case len(o.pos) > 1:
		return false, fmt.Errorf("run: one FILE only, got %q", o.pos)
	}
	if !o.codeSet {
		src := o.pos[0]
		var b []byte
		if src == "-" {
			fromStdin = true
			b, err = io.ReadAll(sio.in)
		} else {
			b, err = os.ReadFile(src)
		}
		if err != nil {
			return false, fmt.Errorf("run: read code: %w", err)
		}
		o.code = string(b)
		if o.lang == "" {
			o.lang = langFromExt(src)
		}
	}
	if o.lang == "" {
		return false, errors.New("run: --lang is required (python, javascript or shell)")
	}
	return fromStdin, nil
}

// request is the exec request the flags describe.
func (o *runOpts) request(sio stdio, codeFromStdin bool, lookupEnv func(string) (string, bool)) (api.ExecRequest, error) {
	req := api.ExecRequest{Language: o.lang, Code: o.code, Artifacts: o.artifacts, Mode: o.mode, Entrypoint: o.entrypoint, Network: o.network}
	if o.inputs != "" {
		if !json.Valid([]byte(o.inputs)) || !strings.HasPrefix(strings.TrimSpace(o.inputs), "{") {
			return req, errors.New("run: --inputs must be one JSON object")
		}
		req.Inputs = json.RawMessage(o.inputs)
	}
	if o.timeout != -1 {
		req.TimeoutMS = &o.timeout
	}
	var err error
	if req.Env, err = runEnv(o.envs, lookupEnv); err != nil {
		return req, err
	}
	if req.Stdin, err = o.readStdin(sio, codeFromStdin); err != nil {
		return req, err
	}
	req.Files, err = runFiles(o.files)
	return req, err
}

// runEnv is --env NAME=VALUE (or NAME, taken from sandboxctl's environment).
func runEnv(envs multiFlag, lookupEnv func(string) (string, bool)) (map[string]string, error) {
	if len(envs) == 0 {
		return nil, nil
	}
	env := make(map[string]string, len(envs))
	for _, kv := range envs {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			v, set := lookupEnv(name)
			if !set {
				return nil, fmt.Errorf("run: --env %s: not set in sandboxctl's environment; use --env %s=VALUE", name, name)
			}
			value = v
		}
		env[name] = value
	}
	return env, nil
}

// readStdin is --stdin-file: UTF-8 text, as the API carries stdin.
func (o *runOpts) readStdin(sio stdio, codeFromStdin bool) (string, error) {
	if o.stdinFile == "" {
		return "", nil
	}
	var b []byte
	var err error
	switch {
	case o.stdinFile == "-" && codeFromStdin:
		return "", errors.New("run: --stdin-file -: standard input already carries the code")
	case o.stdinFile == "-":
		b, err = io.ReadAll(sio.in)
	default:
		b, err = os.ReadFile(o.stdinFile)
	}
	if err != nil {
		return "", fmt.Errorf("run: read stdin: %w", err)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("run: --stdin-file %s is not UTF-8 text; the API carries stdin as a JSON string", o.stdinFile)
	}
	return string(b), nil
}

// runFiles is --file WORKSPACE_PATH=LOCAL_FILE.
func runFiles(files multiFlag) ([]api.ExecFile, error) {
	var out []api.ExecFile
	for _, f := range files {
		ws, local, ok := strings.Cut(f, "=")
		if !ok || ws == "" || local == "" {
			return nil, fmt.Errorf("run: --file %q: want WORKSPACE_PATH=LOCAL_FILE", f)
		}
		b, err := os.ReadFile(local)
		if err != nil {
			return nil, fmt.Errorf("run: --file %s: %w", ws, err)
		}
		out = append(out, api.ExecFile{Path: ws, ContentBase64: base64.StdEncoding.EncodeToString(b)})
	}
	return out, nil
}

// streamedOutput says which of the payload's streams, and whether its text
// displays, were already written as they arrived (a server that does not
// stream sends none).
type streamedOutput struct{ stdout, stderr, displays bool }

// execute runs the exec, streamed (output written as it arrives) or not.
func execute(ctx context.Context, cl *client.Client, session string, req api.ExecRequest, stream bool, sio stdio) (*api.ExecResult, []byte, streamedOutput, error) {
	var st streamedOutput
	if stream {
		res, raw, err := cl.ExecStream(ctx, session, req, func(ev client.Event) {
			switch ev.Type {
			case "stdout": // untrusted, as below
				st.stdout = true
				writePayload(sio.out, ev.Text())
			case "stderr":
				st.stderr = true
				writePayload(sio.err, ev.Text())
			case "display":
				st.displays = true
				writeTextDisplay(sio.out, ev.Display())
			}
		})
		return res, raw, st, err
	}
	if session != "" {
		res, raw, err := cl.SessionExec(ctx, session, req)
		return res, raw, st, err
	}
	res, raw, err := cl.Exec(ctx, req)
	return res, raw, st, err
}

// report prints a result (its output unless streamed, or the raw JSON),
// saves artifacts and displays, and returns the exit status.
func report(res *api.ExecResult, raw []byte, streamed streamedOutput, asJSON bool, artifactsDir string, sio stdio) int {
	if asJSON {
		var buf bytes.Buffer
		if json.Indent(&buf, raw, "", "  ") != nil {
			buf.Reset()
			buf.Write(raw)
		}
		buf.WriteByte('\n')
		_, _ = sio.out.Write(buf.Bytes())
	} else {
		// Untrusted: escaped when it goes to a terminal (termsafe.go).
		if !streamed.stdout {
			writePayload(sio.out, res.Stdout)
		}
		if !streamed.stderr {
			writePayload(sio.err, res.Stderr)
		}
		if !streamed.displays {
			for _, d := range res.Displays {
				writeTextDisplay(sio.out, d)
			}
		}
		if len(res.ReturnValue) > 0 {
			writePayload(sio.out, string(res.ReturnValue)+"\n")
		}
		if e := res.Exception; e != nil && res.Stderr == "" {
			writePayload(sio.err, fmt.Sprintf("sandboxctl: uncaught %s: %s\n", e.Type, e.Message))
		}
	}
	code2 := exitCodeOf(res, sio.err, !asJSON)
	if artifactsDir != "" {
		if err := keepFiles(artifactsDir, res, sio); err != nil {
			fmt.Fprintf(sio.err, "sandboxctl: artifacts: %v\n", err)
			if code2 == exitOK {
				code2 = exitUnreachable
			}
		}
	} else if !asJSON {
		noteUnshown(res, sio)
	}
	return code2
}

// writeTextDisplay prints a text/plain display (a kernel's value of the
// last expression, or display(x) of one) as a REPL would; other types are
// files (--artifacts-dir). The text is the payload's: escaped for a
// terminal like its output.
func writeTextDisplay(w io.Writer, d api.Display) {
	if d.MIME != api.DisplayText {
		return
	}
	if b, err := displayBytes(d); err == nil {
		writePayload(w, strings.TrimSuffix(string(b), "\n")+"\n")
	}
}

// keepFiles saves artifacts and the displays that are not plain text below
// dir, and says on stderr what went where.
func keepFiles(dir string, res *api.ExecResult, sio stdio) error {
	err := saveArtifacts(dir, res.Artifacts)
	saved, derr := saveDisplays(dir, res.ID, res.Displays)
	for _, a := range res.Artifacts {
		saved = append(saved, a.Path)
	}
	if len(saved) > 0 {
		fmt.Fprintf(sio.err, "sandboxctl: saved to %s: %s\n", dir, strings.Join(saved, ", "))
	}
	return errors.Join(err, derr)
}

// noteUnshown tells, without --artifacts-dir, what the terminal did not
// show: rich displays and artifacts.
func noteUnshown(res *api.ExecResult, sio stdio) {
	var kinds []string
	n := 0
	for _, d := range res.Displays {
		if d.MIME == api.DisplayText {
			continue
		}
		n++
		if !slices.Contains(kinds, d.MIME) {
			kinds = append(kinds, d.MIME)
		}
	}
	var unshown []string
	if n > 0 {
		unshown = append(unshown, fmt.Sprintf("%d display(s) (%s)", n, strings.Join(kinds, ", ")))
	}
	if len(res.Artifacts) > 0 {
		unshown = append(unshown, fmt.Sprintf("%d artifact(s)", len(res.Artifacts)))
	}
	if len(unshown) > 0 {
		fmt.Fprintf(sio.err, "sandboxctl: %s not shown; use --artifacts-dir DIR or --json to keep them\n", strings.Join(unshown, " and "))
	}
}

// exitCodeOf maps a result to sandboxctl's exit status and, when notes is
// set, explains on stderr what the plain output does not show.
func exitCodeOf(res *api.ExecResult, w io.Writer, notes bool) int {
	note := func(format string, args ...any) {
		if notes {
			fmt.Fprintf(w, "sandboxctl: "+format+"\n", args...)
		}
	}
	if res.StdoutTruncated {
		note("stdout was cut at the server's output limit")
	}
	if res.StderrTruncated {
		note("stderr was cut at the server's output limit")
	}
	if res.QuotaExceeded {
		note("the workspace disk quota stopped the payload")
	}
	if res.ArtifactsTruncated {
		note("not every artifact was returned (artifact limits)")
	}
	switch {
	case res.TimedOut:
		note("timed out after %d ms; every process of the exec was killed", res.DurationMS)
		return exitTimedOut
	case res.Signal != nil:
		sig := *res.Signal
		if res.OOMKilled {
			note("killed by %s: out of memory", sig)
		} else {
			note("killed by %s", sig)
		}
		if n := unix.SignalNum(sig); n != 0 {
			return exitSignalBase + int(n)
		}
		return exitSignalBase
	case res.ExitCode != nil:
		c := *res.ExitCode
		if c < 0 || c > 255 {
			note("exit code %d does not fit an exit status", c)
			return 1
		}
		return c
	default:
		note("the result has neither an exit code nor a signal")
		return 1
	}
}

func langFromExt(file string) string {
	switch strings.ToLower(filepath.Ext(file)) {
	case ".py":
		return "python"
	case ".js", ".mjs", ".cjs":
		return "javascript"
	case ".sh":
		return "shell"
	}
	return ""
}

// saveArtifacts writes artifacts below dir. The paths come from the server
// and are checked anyway: through os.Root nothing can land outside dir, not
// even via a symlink already in it, and existing files are not overwritten.
func saveArtifacts(dir string, arts []api.Artifact) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()
	var errs []error
	for _, a := range arts {
		if err := saveArtifact(root, a); err != nil {
			errs = append(errs, fmt.Errorf("%q: %w", a.Path, err))
		}
	}
	return errors.Join(errs...)
}

func saveArtifact(root *os.Root, a api.Artifact) error {
	p := a.Path
	if p == "" || path.IsAbs(p) || path.Clean(p) != p || p == "." || strings.HasPrefix(p, "../") || p == ".." || strings.ContainsAny(p, "\\\x00") {
		return errors.New("unsafe path; not written")
	}
	data, err := base64.StdEncoding.DecodeString(a.ContentBase64)
	if err != nil {
		return fmt.Errorf("content: %w", err)
	}
	sum := sha256.Sum256(data)
	if a.SHA256 != "" && !strings.EqualFold(hex.EncodeToString(sum[:]), a.SHA256) {
		return errors.New("content does not match its sha256; not written")
	}
	if d := path.Dir(p); d != "." {
		if err := root.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// displayExt is the file extension a display is saved with.
var displayExt = map[string]string{
	api.DisplayPNG: ".png", api.DisplayJPEG: ".jpg", api.DisplaySVG: ".svg", api.DisplayHTML: ".html",
	api.DisplayMarkdown: ".md", api.DisplayLatex: ".tex", api.DisplayText: ".txt", api.DisplayJSON: ".json",
	api.DisplayPlotly: ".plotly.json",
}

// saveDisplays writes each display that is not plain text (printed
// instead) below dir as display-<exec id prefix>-N.<ext>, through os.Root
// and never over an existing file, and returns the names it wrote.
func saveDisplays(dir, execID string, ds []api.Display) ([]string, error) {
	var rich []int
	for i, d := range ds {
		if d.MIME != api.DisplayText {
			rich = append(rich, i)
		}
	}
	if len(rich) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer root.Close()
	prefix := execID
	if len(prefix) > 8 {
		prefix = prefix[:8]
	}
	var errs []error
	var names []string
	for _, i := range rich {
		d := ds[i]
		ext, ok := displayExt[d.MIME]
		if !ok {
			errs = append(errs, fmt.Errorf("display %d: unknown type %q; not written", i+1, d.MIME))
			continue
		}
		name := fmt.Sprintf("display-%s-%d%s", prefix, i+1, ext)
		data, err := displayBytes(d)
		if err == nil {
			err = writeNew(root, name, data)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("display %d: %w", i+1, err))
			continue
		}
		names = append(names, name)
	}
	return names, errors.Join(errs...)
}

func displayBytes(d api.Display) ([]byte, error) {
	switch {
	case d.DataBase64 != "":
		return base64.StdEncoding.DecodeString(d.DataBase64)
	case d.MIME == api.DisplayJSON || d.MIME == api.DisplayPlotly:
		return append(append([]byte{}, d.Data...), '\n'), nil
	}
	var s string
	if err := json.Unmarshal(d.Data, &s); err != nil {
		return nil, err
	}
	return []byte(s), nil
}

func writeNew(root *os.Root, name string, data []byte) error {
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
