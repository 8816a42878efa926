package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/client"
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
	// The supervisor's own setting and variable: running without limits
	// that it allowed is a warning, not a failure.
	allowDefault, _ := strconv.ParseBool(env(policy.EnvName("allow-no-cgroups"), "false"))
	allowNone := fs.Bool("allow-no-cgroups", allowDefault, "")
	conn := addConnFlags(fs, lookupEnv)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return usage(sio.err, "doctor: %v", err)
	}
	if len(pos) > 0 {
		return usage(sio.err, "doctor: unexpected argument %q", pos[0])
	}
	var rep doctor.Report
	if conn.url != "" {
		// Remote: only what the wire shows (doctor.RunRemote); the
		// host checks need the supervisor's host.
		r, err := newRemoteDoctor(conn)
		if err != nil {
			fmt.Fprintf(sio.err, "sandboxctl: doctor: %v\n", err)
			return exitUsage
		}
		rep = doctor.RunRemote(ctx, r, time.Now())
	} else {
		if _, err := conn.client(); err != nil {
			return usage(sio.err, "doctor: %v", err)
		}
		rep = doctor.Run(ctx, doctorHost(), doctor.Options{
			HelperPath: *helper, HelperConfigPath: *helperConfig, SocketPath: conn.socket, GOARCH: runtime.GOARCH, AllowNoCgroups: *allowNone,
			VerifyEnvironment: func(e config.Environment) error { return envtree.CheckRegistered(e.Root, e.Manifest, e.Digest) },
		})
	}
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

// remoteDoctor is doctor.Remote over the client: /healthz without the key,
// /v1/health with it.
type remoteDoctor struct {
	url           string
	anon, withKey *client.Client
}

func newRemoteDoctor(c *connFlags) (*remoteDoctor, error) {
	withKey, err := c.client()
	if err != nil {
		return nil, err
	}
	anon, err := client.NewRemote(client.Remote{URL: c.url, CAFile: c.caFile, ClientCert: c.clientCert, ClientKey: c.clientKey})
	if err != nil {
		return nil, err
	}
	return &remoteDoctor{url: c.url, anon: anon, withKey: withKey}, nil
}

func (r *remoteDoctor) URL() string { return r.url }

func (r *remoteDoctor) Healthz(ctx context.Context) (*api.Liveness, *tls.ConnectionState, error) {
	return r.anon.Healthz(ctx)
}

func (r *remoteDoctor) Health(ctx context.Context) (*api.Health, error) {
	h, _, err := r.withKey.Health(ctx)
	return h, err
}
