package nsinit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// fixEgressDir is the fix when the egress directory is refused.
const fixEgressDir = "lay out the state directory as make install does: egress/ next to workspaces/, owned by the service user, below a root-owned parent; set egress_dir and relay in the helper config"

// openEgress opens, for an egress launch, the exec's socket directory
// (egress_dir/<token>) as an O_PATH fd for bwrap's --ro-bind-fd, with the
// same checks as a workspace: no symlink, not outside egress_dir, owned by
// the supervisor's uid. The relay binary must be root-owned. For network
// "none" it does nothing and leaves fds.Egress 0 (none).
func (l *launch) openEgress() error {
	if l.spec.Network != spec.NetworkEgress {
		return nil
	}
	if l.cfg.EgressDir == "" {
		return errors.New("network \"egress\" asked for, but the helper config sets no egress_dir")
	}
	if err := config.CheckRootOwned(l.cfg.Relay); err != nil {
		return fmt.Errorf("relay: %w", err)
	}
	fd, err := openWorkspace(l.cfg.EgressDir, l.spec.Egress, l.pre.RUID)
	if err != nil {
		return fmt.Errorf("egress directory: %w", err)
	}
	if fd == 0 {
		// Cannot happen (fd 0 is stdin); 0 means "no egress" to BwrapArgs.
		unix.Close(fd)
		return errors.New("egress directory opened as fd 0")
	}
	l.fds.Egress = fd
	return nil
}

// ProxyEnv is what an egress payload's environment points at the relay:
// set by the helper after the request's env, so a request cannot redirect
// it. Lower- and upper-case forms, because tools disagree on which they
// read (curl ignores upper-case HTTP_PROXY, CVE-2016-5385 "httpoxy").
func ProxyEnv() []string {
	u := "http://127.0.0.1:" + strconv.Itoa(config.EgressRelayPort)
	var env []string
	for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy",
		"npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY"} {
		env = append(env, name+"="+u)
	}
	// Node's fetch (undici) honours the proxy variables only with this.
	return append(env, "NODE_USE_ENV_PROXY=1")
}

// payloadEnv is the payload's environment: the base, the request's, and
// for egress the proxy variables last (they win).
func (l *launch) payloadEnv() []string {
	if l.spec.Network != spec.NetworkEgress {
		return PayloadEnv(l.cfg.BaseEnv, l.spec.Process.Env)
	}
	return PayloadEnv(PayloadEnv(l.cfg.BaseEnv, l.spec.Process.Env), ProxyEnv())
}

// egressArgs are the bwrap options of an egress sandbox: the relay binary
// and the exec's socket directory, both read-only at fixed paths.
func egressArgs(cfg *config.Config, fds BwrapFDs) []string {
	if fds.Egress <= 0 {
		return nil
	}
	return []string{
		"--ro-bind", cfg.Relay, config.SandboxRelay,
		"--ro-bind-fd", strconv.Itoa(fds.Egress), config.SandboxEgress,
	}
}

// shimArgs is how bwrap starts the shim: with --egress, the shim starts the
// relay before the payload. For network "none", exactly what it always was.
func shimArgs(fds BwrapFDs) []string {
	a := []string{config.SandboxDir + "/exec"}
	if fds.Egress > 0 {
		a = append(a, "--egress")
	}
	return append(a, config.SandboxDir+"/env")
}

// mountsDigest is MountsDigest for network "none" (unchanged), and for
// "egress" the digest over it and the egress mounts (the relay binary's
// path and digest, the socket directory's fixed place), so the result's
// policy.mounts_sha256 says the sandbox had a way out.
func (l *launch) mountsDigest() string {
	d := MountsDigest(l.cfg, l.spec.TmpSizeBytes)
	if l.spec.Network != spec.NetworkEgress {
		return d
	}
	return EgressMountsDigest(d, l.cfg.Relay, fileSHA256(l.cfg.Relay))
}

// EgressMountsDigest combines the base mounts digest with the egress mounts.
func EgressMountsDigest(base, relay, relaySHA256 string) string {
	return sha256Hex([]byte(strings.Join([]string{base, "egress", relay, relaySHA256, config.SandboxRelay, config.SandboxEgress}, "\x00")))
}
