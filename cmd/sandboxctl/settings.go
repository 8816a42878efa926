package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sandboxd/sandboxd/client"
)

// cmdAdminSettings is `sandboxctl admin settings get|set KEY=VALUE...`:
// the live admin settings of a running supervisor. KEY is the API's name,
// or the same with dots (archive.backend, archive.s3.endpoint); VALUE is an
// integer, text for the archive settings (true or false for
// archive.s3.path_style) or "default" (back to the operator's value).
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
	tw := tabwriter.NewWriter(sio.out, 12, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", "SETTING", "VALUE", "CAP", "SOURCE")
	for _, x := range s.Settings {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", termSafe(x.Key), termSafe(fmt.Sprint(x.Value)), termSafe(fmt.Sprint(x.Cap)), termSafe(x.Source))
	}
	if err := tw.Flush(); err != nil {
		return fail(sio.err, err)
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
		k = strings.ReplaceAll(k, ".", "_") // archive.s3.bucket is archive_s3_bucket
		if _, dup := patch[k]; dup {
			return nil, fmt.Errorf("%q given twice", k)
		}
		switch n, err := strconv.ParseInt(v, 10, 64); {
		case v == "default":
			patch[k] = nil
		case k == "archive_s3_path_style":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fmt.Errorf("%q: want true or false", a)
			}
			patch[k] = b
		case strings.HasPrefix(k, "archive_"):
			patch[k] = v // a bucket or a region may be all digits
		case err == nil:
			patch[k] = n
		default:
			patch[k] = v
		}
	}
	return patch, nil
}
