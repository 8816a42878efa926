package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/client"
)

// cmdAdminSettings is `sandboxctl admin settings get|set KEY=VALUE...`:
// the live admin settings of a running supervisor. VALUE is an integer, a
// word (archive_backend) or "default" (back to the operator's value).
func cmdAdminSettings(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("admin settings", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	socket := fs.String("socket", defaultSocket(lookupEnv), "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "admin settings: %v", err)
	}
	if len(pos) == 0 || (pos[0] != "get" && pos[0] != "set") || (pos[0] == "get" && len(pos) > 1) || (pos[0] == "set" && len(pos) < 2) {
		return usage(sio.err, "usage: sandboxctl admin settings get | set KEY=VALUE... (VALUE \"default\" resets a key)")
	}
	c := client.New(*socket)
	var s *client.Settings
	if pos[0] == "get" {
		s, err = c.Settings(ctx)
	} else {
		patch, perr := parseSettingArgs(pos[1:])
		if perr != nil {
			return usage(sio.err, "admin settings set: %v", perr)
		}
		s, err = c.PatchSettings(ctx, patch)
	}
	if err != nil {
		return fail(sio.err, err)
	}
	fmt.Fprintf(sio.out, "%-22s %-12s %-12s %s\n", "SETTING", "VALUE", "CAP", "SOURCE")
	for _, x := range s.Settings {
		fmt.Fprintf(sio.out, "%-22s %-12v %-12v %s\n", x.Key, x.Value, x.Cap, x.Source)
	}
	return exitOK
}

// parseSettingArgs turns KEY=VALUE words into a patch; the supervisor
// validates keys and ranges, this only types the values.
func parseSettingArgs(args []string) (map[string]any, error) {
	patch := map[string]any{}
	for _, a := range args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || k == "" || v == "" {
			return nil, fmt.Errorf("%q: want KEY=VALUE", a)
		}
		if _, dup := patch[k]; dup {
			return nil, fmt.Errorf("%q given twice", k)
		}
		switch n, err := strconv.ParseInt(v, 10, 64); {
		case v == "default":
			patch[k] = nil
		case err == nil:
			patch[k] = n
		default:
			patch[k] = v
		}
	}
	return patch, nil
}
