// Command composecheck validates deploy/compose/compose.yaml offline, the
// way `docker compose config` does (it uses the same loader,
// github.com/compose-spec/compose-go, with the Compose Specification's JSON
// schema), and then checks the security settings SECURITY.md promises:
// the Localhost-format seccomp profile (never unconfined, identical to
// profiles/kubernetes-worker.json), all capabilities dropped but the
// helper's four (SETGID, SETUID, NET_ADMIN, SYS_ADMIN), no-new-privileges
// off, a read-only root, a non-root user whose primary group is not the
// socket's, no network.
//
//	go run ./composecheck -profile ../../profiles/kubernetes-worker.json ../compose/compose.yaml
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

func main() {
	profile := flag.String("profile", "", "the repository's kubernetes-worker.json, which the compose file's copy must equal")
	service := flag.String("service", "sandboxd", "the supervisor's service")
	flag.Parse()
	if flag.NArg() != 1 || *profile == "" {
		fmt.Fprintln(os.Stderr, "usage: composecheck -profile PROFILE COMPOSE_FILE")
		os.Exit(2)
	}
	problems, err := check(flag.Arg(0), *profile, *service)
	if err != nil {
		fmt.Fprintln(os.Stderr, "composecheck:", err)
		os.Exit(1)
	}
	if len(problems) > 0 {
		for _, p := range problems {
			fmt.Fprintln(os.Stderr, "composecheck:", p)
		}
		os.Exit(1)
	}
	fmt.Printf("composecheck: %s: valid (compose-spec schema and loader), security settings as documented\n", flag.Arg(0))
}

func check(file, profile, name string) ([]string, error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(abs)
	opts, err := cli.NewProjectOptions([]string{abs}, cli.WithWorkingDirectory(dir), cli.WithName("sandboxd"), cli.WithConsistency(true))
	if err != nil {
		return nil, err
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		return nil, fmt.Errorf("%s does not load: %w", file, err)
	}
	svc, err := p.GetService(name)
	if err != nil {
		return nil, err
	}
	bad := checkService(svc, dir, profile)
	// Every other service too: a recipe that switches seccomp or AppArmor
	// off for a neighbour (privileged turns both off) breaks the
	// clusters' "no unconfined" policies just the same.
	for _, other := range p.Services {
		if other.Name == name {
			continue
		}
		for _, u := range unconfinedOpts(other) {
			bad = append(bad, fmt.Sprintf("service %s: %s: never unconfined", other.Name, u))
		}
	}
	return bad, nil
}

// unconfinedOpts lists the settings of s that turn seccomp or AppArmor off.
func unconfinedOpts(s types.ServiceConfig) []string {
	var out []string
	for _, o := range s.SecurityOpt {
		k, v, _ := strings.Cut(o, "=")
		if !strings.Contains(o, "=") {
			k, v, _ = strings.Cut(o, ":")
		}
		if (k == "seccomp" || k == "apparmor") && strings.EqualFold(strings.TrimSpace(v), "unconfined") {
			out = append(out, "security_opt "+o)
		}
	}
	if s.Privileged {
		out = append(out, "privileged: true (no seccomp, no AppArmor)")
	}
	return out
}

func checkService(s types.ServiceConfig, dir, profile string) []string {
	var bad []string
	fail := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }

	var seccomp, apparmor []string
	nnpOff := false
	for _, o := range s.SecurityOpt {
		// Docker takes KEY=VALUE and the older KEY:VALUE.
		sep := "="
		if !strings.Contains(o, "=") {
			sep = ":"
		}
		k, v, _ := strings.Cut(o, sep)
		if k == "no-new-privileges" && v == "" {
			v = "true"
		}
		switch k {
		case "seccomp":
			seccomp = append(seccomp, v)
		case "apparmor":
			apparmor = append(apparmor, v)
		case "no-new-privileges":
			nnpOff = v == "false"
		}
	}
	switch {
	case len(seccomp) != 1:
		fail("want exactly one seccomp security_opt, have %q", seccomp)
	case seccomp[0] == "unconfined" || seccomp[0] == "":
		fail("seccomp must never be unconfined")
	default:
		got, err := os.ReadFile(filepath.Join(dir, seccomp[0]))
		if err != nil {
			fail("seccomp profile: %v", err)
		} else if want, err := os.ReadFile(profile); err != nil {
			fail("reference profile: %v", err)
		} else if !bytes.Equal(got, want) {
			fail("%s differs from %s: copy it again (cp %s %s)", seccomp[0], profile, profile, filepath.Join(dir, seccomp[0]))
		}
	}
	// apparmor=sandboxd: the profile profiles/apparmor/sandboxd (the
	// runtime default plus bubblewrap's mounts); never unconfined.
	if len(apparmor) != 1 || apparmor[0] != "sandboxd" {
		fail("want exactly one apparmor security_opt, apparmor=sandboxd (never unconfined), have %q", apparmor)
	}
	if !nnpOff {
		fail("security_opt must say no-new-privileges:false: file capabilities do nothing under no_new_privs")
	}
	if !slices.Equal(upper(s.CapDrop), []string{"ALL"}) {
		fail("cap_drop must be [ALL], have %q", s.CapDrop)
	}
	add := upper(s.CapAdd)
	slices.Sort(add)
	if !slices.Equal(add, []string{"NET_ADMIN", "SETGID", "SETUID", "SYS_ADMIN"}) {
		fail("cap_add must be exactly [SETGID, SETUID, NET_ADMIN, SYS_ADMIN] (the helper's file capabilities), have %q", s.CapAdd)
	}
	// The socket's group is API access; the helper's group is the right to
	// run the helper. They must differ.
	if sg := s.Environment["SANDBOXD_SOCKET_GROUP"]; sg != nil {
		if _, g, _ := strings.Cut(s.User, ":"); g == *sg {
			fail("SANDBOXD_SOCKET_GROUP %s is the supervisor's primary group", *sg)
		}
		if *sg == helperGID {
			fail("SANDBOXD_SOCKET_GROUP %s is the helper's group", *sg)
		}
	} else {
		fail("SANDBOXD_SOCKET_GROUP must be set: the socket group for callers, not the helper's")
	}
	if s.Privileged {
		fail("privileged must not be set")
	}
	if !s.ReadOnly {
		fail("read_only must be true")
	}
	if u, _, _ := strings.Cut(s.User, ":"); u == "" || u == "0" || u == "root" {
		fail("user must be the non-root service user, have %q", s.User)
	}
	if s.NetworkMode != "none" {
		fail("network_mode must be none (the API is a Unix socket), have %q", s.NetworkMode)
	}
	return bad
}

// helperGID is the image's sandboxd-helper group (deploy/compose/Dockerfile).
const helperGID = "10000"

func upper(in []string) []string {
	out := make([]string, len(in))
	for i, c := range in {
		out[i] = strings.TrimPrefix(strings.ToUpper(c), "CAP_")
	}
	return out
}
