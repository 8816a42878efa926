package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sandboxd/sandboxd/api"
)

func cmdHealth(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	conn := addConnFlags(fs, lookupEnv)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "health: %v", err)
	}
	if len(pos) > 0 {
		return usage(sio.err, "health: unexpected argument %q", pos[0])
	}
	cl, err := conn.client()
	if err != nil {
		return usage(sio.err, "%v", err)
	}
	h, raw, err := cl.Health(ctx)
	if err != nil {
		return fail(sio.err, err)
	}
	if *asJSON {
		var buf bytes.Buffer
		if json.Indent(&buf, raw, "", "  ") != nil {
			buf.Reset()
			buf.Write(raw)
		}
		buf.WriteByte('\n')
		_, _ = sio.out.Write(buf.Bytes())
	} else {
		state := "ready"
		switch {
		case !h.OK:
			state = "NOT READY"
		case h.Checks.Cgroups == "none":
			state = "ready, DEGRADED: memory, pids and CPU limits are not enforced (cgroups none, --allow-no-cgroups)"
		case h.Status == api.HealthDegraded:
			state = "ready, DEGRADED (see archive)"
		}
		fmt.Fprintf(sio.out, "sandboxd %s: %s\n", h.Version, state)
		for _, c := range h.Checks.List() { // API.md's order
			fmt.Fprintf(sio.out, "  %-9s %s\n", c.Name, c.Value)
		}
		fmt.Fprintf(sio.out, "  %-9s %s\n", "runtimes", strings.Join(h.Runtimes, ", "))
	}
	if !h.OK {
		return exitNotReady
	}
	return exitOK
}
