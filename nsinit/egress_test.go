package nsinit

import (
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

func TestBwrapArgsEgress(t *testing.T) {
	cfg := testConfig()
	rt := cfg.Runtimes["python"]
	none := BwrapArgs(cfg, rt, testFDs, 1<<20)
	fds := testFDs
	fds.Egress = 11
	eg := BwrapArgs(cfg, rt, fds, 1<<20)

	opts, cmd := parseBwrap(t, eg)
	var sawRelay, sawDir bool
	for _, o := range opts {
		if o.name == "--ro-bind" && o.args[1] == config.SandboxRelay {
			sawRelay = o.args[0] == cfg.Relay
		}
		if o.name == "--ro-bind-fd" {
			sawDir = o.args[0] == "11" && o.args[1] == config.SandboxEgress
		}
		if o.name == "--bind-fd" && o.args[1] == config.SandboxEgress {
			t.Error("the egress directory is bound writable")
		}
	}
	if !sawRelay || !sawDir {
		t.Errorf("egress argv lacks the relay or the read-only socket directory: %q", eg)
	}
	want := append([]string{config.SandboxDir + "/exec", "--egress", config.SandboxDir + "/env"}, rt.Argv...)
	if !slices.Equal(cmd, want) {
		t.Errorf("command %q, want %q", cmd, want)
	}
	// Network "none": no relay, no bind, no --egress.
	for _, a := range none {
		if strings.Contains(a, "relay") || strings.Contains(a, "egress") || a == "--ro-bind-fd" {
			t.Errorf("network none argv mentions %q: %q", a, none)
		}
	}
}

func TestPayloadEnvEgress(t *testing.T) {
	cfg := testConfig()
	req := []string{"HTTPS_PROXY=http://evil:1", "FOO=1", "npm_config_proxy=http://evil:2"}
	l := &launch{cfg: cfg, spec: &spec.LaunchSpec{Network: spec.NetworkNone, Process: procEnv(req)}}
	if got := l.payloadEnv(); !slices.Equal(got, PayloadEnv(cfg.BaseEnv, req)) {
		t.Errorf("network none env changed: %q", got)
	}
	l.spec.Network = spec.NetworkEgress
	env := l.payloadEnv()
	for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY",
		"npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY"} {
		if !slices.Contains(env, name+"=http://127.0.0.1:3128") {
			t.Errorf("%s not pointed at the relay: %q", name, env)
		}
	}
	if !slices.Contains(env, "FOO=1") {
		t.Errorf("request env lost: %q", env)
	}
}

func procEnv(env []string) specs.Process { return specs.Process{Env: env} }

func TestMountsDigestEgress(t *testing.T) {
	cfg := testConfig()
	l := &launch{cfg: cfg, spec: &spec.LaunchSpec{Network: spec.NetworkNone, TmpSizeBytes: 1 << 20}}
	none := l.mountsDigest()
	if none != MountsDigest(cfg, 1<<20) {
		t.Error("network none digest changed")
	}
	l.spec.Network = spec.NetworkEgress
	if l.mountsDigest() == none {
		t.Error("an egress sandbox attests the same mounts as a none one")
	}
}
