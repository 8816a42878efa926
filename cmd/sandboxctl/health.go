package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/client"
)

// checkOrder is API.md's order of the health checks; unknown ones from a
// newer server follow, sorted.
var checkOrder = []string{"bwrap", "userns", "seccomp", "helper", "cgroups", "disk"}

func cmdHealth(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("health", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	socket := fs.String("socket", defaultSocket(lookupEnv), "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "health: %v", err)
	}
	if len(pos) > 0 {
		return usage(sio.err, "health: unexpected argument %q", pos[0])
	}
	h, raw, err := client.New(*socket).Health(ctx)
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
		if !h.OK {
			state = "NOT READY"
		}
		fmt.Fprintf(sio.out, "sandboxd %s: %s\n", h.Version, state)
		for _, name := range orderedChecks(h.Checks) {
			fmt.Fprintf(sio.out, "  %-9s %s\n", name, h.Checks[name])
		}
		fmt.Fprintf(sio.out, "  %-9s %s\n", "runtimes", strings.Join(h.Runtimes, ", "))
	}
	if !h.OK {
		return exitNotReady
	}
	return exitOK
}

func orderedChecks(checks map[string]string) []string {
	var out []string
	known := map[string]bool{}
	for _, n := range checkOrder {
		known[n] = true
		if _, ok := checks[n]; ok {
			out = append(out, n)
		}
	}
	var extra []string
	for n := range checks {
		if !known[n] {
			extra = append(extra, n)
		}
	}
	sort.Strings(extra)
	return append(out, extra...)
}
