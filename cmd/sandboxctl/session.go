package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// cmdSession: sandboxctl session create|list|show|exec|rm.
func cmdSession(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	if len(args) == 0 {
		return usage(sio.err, "session: want create, list, show, exec or rm")
	}
	sub, args := args[0], args[1:]
	if sub == "exec" {
		if len(args) == 0 {
			return usage(sio.err, "session exec: want a session id")
		}
		return cmdRun(ctx, append([]string{"--session", args[0]}, args[1:]...), sio, lookupEnv)
	}
	fs := flag.NewFlagSet("session "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	conn := addConnFlags(fs, lookupEnv)
	asJSON := fs.Bool("json", false, "")
	ttl := fs.Int64("ttl", 0, "")
	key := fs.String("key", "", "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "session %s: %v", sub, err)
	}
	cl, err := conn.client()
	if err != nil {
		return usage(sio.err, "%v", err)
	}
	needID := func() (string, bool) {
		if len(pos) != 1 {
			return "", false
		}
		return pos[0], true
	}
	switch sub {
	case "create":
		var ttlp *int64
		if *ttl > 0 {
			ttlp = ttl
		}
		s, raw, err := cl.CreateSession(ctx, ttlp, *key)
		if err != nil {
			return fail(sio.err, err)
		}
		if *asJSON {
			return printRaw(sio.out, raw)
		}
		fmt.Fprintln(sio.out, s.ID)
		if s.Restored {
			fmt.Fprintln(sio.err, "sandboxctl: restored the workspace archived under this key")
		}
		return exitOK
	case "list":
		list, raw, err := cl.ListSessions(ctx)
		if err != nil {
			return fail(sio.err, err)
		}
		if *asJSON {
			return printRaw(sio.out, raw)
		}
		tw := tabwriter.NewWriter(sio.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKEY\tDISK\tLAST USED\tEXPIRES")
		for _, s := range list {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.ID, s.Key, s.DiskBytes, s.LastUsedAt.Format(time.RFC3339), s.ExpiresAt.Format(time.RFC3339))
		}
		_ = tw.Flush()
		return exitOK
	case "show":
		id, ok := needID()
		if !ok {
			return usage(sio.err, "session show: want one session id")
		}
		_, raw, err := cl.GetSession(ctx, id)
		if err != nil {
			return fail(sio.err, err)
		}
		return printRaw(sio.out, raw)
	case "rm":
		id, ok := needID()
		if !ok {
			return usage(sio.err, "session rm: want one session id")
		}
		if err := cl.DeleteSession(ctx, id); err != nil {
			return fail(sio.err, err)
		}
		return exitOK
	}
	return usage(sio.err, "session: unknown subcommand %q", sub)
}

// cmdFiles: sandboxctl files put|get|ls|rm SESSION ...
func cmdFiles(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	if len(args) == 0 {
		return usage(sio.err, "files: want put, get, ls or rm")
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("files "+sub, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	conn := addConnFlags(fs, lookupEnv)
	asJSON := fs.Bool("json", false, "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "files %s: %v", sub, err)
	}
	cl, err := conn.client()
	if err != nil {
		return usage(sio.err, "%v", err)
	}
	switch sub {
	case "put": // SESSION WS_PATH LOCAL|-
		if len(pos) != 3 {
			return usage(sio.err, "files put: want SESSION WORKSPACE_PATH LOCAL_FILE (or - for stdin)")
		}
		r := sio.in
		size := int64(-1)
		if pos[2] != "-" {
			f, err := os.Open(pos[2])
			if err != nil {
				return usage(sio.err, "files put: %v", err)
			}
			defer f.Close()
			if st, err := f.Stat(); err == nil {
				size = st.Size()
			}
			r = f
		}
		u, err := cl.PutFile(ctx, pos[0], pos[1], r, size)
		if err != nil {
			return fail(sio.err, err)
		}
		fmt.Fprintf(sio.out, "%s\t%d\t%s\n", u.Path, u.Size, u.SHA256)
		return exitOK
	case "get": // SESSION WS_PATH [LOCAL|-]
		if len(pos) < 2 || len(pos) > 3 {
			return usage(sio.err, "files get: want SESSION WORKSPACE_PATH [LOCAL_FILE]")
		}
		w := sio.out
		if len(pos) == 3 && pos[2] != "-" {
			// Never overwrite: a partial download must not clobber a file.
			f, err := os.OpenFile(pos[2], os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return usage(sio.err, "files get: %v", err)
			}
			defer f.Close()
			w = f
		}
		if w == sio.out && isTerminal(sio.out) {
			// A workspace file shown on a terminal is payload output too.
			var buf strings.Builder
			if _, err := cl.GetFile(ctx, pos[0], pos[1], &buf); err != nil {
				return fail(sio.err, err)
			}
			writePayload(sio.out, buf.String())
			return exitOK
		}
		if _, err := cl.GetFile(ctx, pos[0], pos[1], w); err != nil {
			return fail(sio.err, err)
		}
		return exitOK
	case "ls":
		if len(pos) != 1 {
			return usage(sio.err, "files ls: want SESSION")
		}
		files, raw, err := cl.ListFiles(ctx, pos[0])
		if err != nil {
			return fail(sio.err, err)
		}
		if *asJSON {
			return printRaw(sio.out, raw)
		}
		for _, f := range files {
			// The path is the payload's choice: escaped on a terminal.
			writePayload(sio.out, fmt.Sprintf("%s\t%10d\t%s\t%s\n", f.Mode, f.Size, f.ModifiedAt.Format(time.RFC3339), f.Path))
		}
		return exitOK
	case "rm":
		if len(pos) != 2 {
			return usage(sio.err, "files rm: want SESSION WORKSPACE_PATH")
		}
		if err := cl.DeleteFile(ctx, pos[0], pos[1]); err != nil {
			return fail(sio.err, err)
		}
		return exitOK
	}
	return usage(sio.err, "files: unknown subcommand %q", sub)
}

func printRaw(w io.Writer, raw []byte) int {
	var v any
	if json.Unmarshal(raw, &v) == nil {
		b, _ := json.MarshalIndent(v, "", "  ")
		fmt.Fprintln(w, string(b))
	} else {
		_, _ = w.Write(raw)
	}
	return exitOK
}
