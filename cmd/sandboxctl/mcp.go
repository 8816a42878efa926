package main

import (
	"context"
	"flag"
	"io"
	"log/slog"

	"github.com/sandboxd/sandboxd/mcp"
)

// version is set at build time (as sandboxd's); the MCP server reports it.
var version = "0.1.0-dev"

// cmdMCP serves the Model Context Protocol on stdin/stdout for an agent,
// reaching sandboxd with the usual connection flags. Nothing but MCP
// messages goes to stdout; diagnostics go to stderr.
func cmdMCP(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	fs := flag.NewFlagSet("mcp", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	conn := addConnFlags(fs, lookupEnv)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "mcp: %v", err)
	}
	if len(pos) > 0 {
		return usage(sio.err, "mcp: unexpected argument %q", pos[0])
	}
	cl, err := conn.client()
	if err != nil {
		return usage(sio.err, "mcp: %v", err)
	}
	log := slog.New(slog.NewTextHandler(sio.err, nil))
	if err := mcp.New(cl, version, log).Serve(ctx, sio.in, sio.out); err != nil {
		return fail(sio.err, err)
	}
	return exitOK
}
