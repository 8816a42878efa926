package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime"

	"github.com/sandboxd/sandboxd/doctor"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/envtree"
	"github.com/sandboxd/sandboxd/policy"
)

// doctorHost is the machine doctor looks at; tests replace it.
var doctorHost = doctor.Real

// cmdDoctor checks the host and the installation the way an operator would,
// and prints the fix of every failing check. Exit 0 when nothing failed
// (warnings allowed), 1 when something did.
func cmdDoctor(ctx context.Context, args []string, sio stdio, lookupEnv func(string) (string, bool)) int {
	env := func(name, def string) string {
		if v, ok := lookupEnv(name); ok && v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "")
	helper := fs.String("helper", env(policy.EnvName("helper"), policy.DefaultHelperPath), "")
	helperConfig := fs.String("helper-config", env(policy.EnvName("helper-config"), policy.DefaultHelperConfigPath), "")
	socket := fs.String("socket", defaultSocket(lookupEnv), "")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "doctor: %v", err)
	}
	if len(pos) > 0 {
		return usage(sio.err, "doctor: unexpected argument %q", pos[0])
	}
	rep := doctor.Run(ctx, doctorHost(), doctor.Options{
		HelperPath: *helper, HelperConfigPath: *helperConfig, SocketPath: *socket, GOARCH: runtime.GOARCH,
		VerifyEnvironment: func(e config.Environment) error { return envtree.CheckRegistered(e.Root, e.Manifest, e.Digest) },
	})
	if *asJSON {
		err = rep.WriteJSON(sio.out)
	} else {
		err = rep.WriteText(sio.out)
	}
	if err != nil {
		fmt.Fprintf(sio.err, "sandboxctl: doctor: %v\n", err)
		return exitUnreachable
	}
	if !rep.OK {
		return exitNotReady
	}
	return exitOK
}
