package nsinit

import (
	"encoding/json"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// warmUp builds encoding/json's per-type codecs for everything a launch
// decodes and encodes -- the spec, the config, each step's facts -- before
// the spec is read. It reads no file and no fd and decides nothing: the
// codecs are built by reflection on first use (about 1 ms here, `go test
// -run TestWarmUp -v` prints it), and a pre-started helper (the
// supervisor's --helper-pool) does this while it waits rather than while a
// launch waits for it. A helper started for one launch pays the same work
// either way.
func warmUp() {
	var s spec.LaunchSpec
	_ = json.Unmarshal([]byte(`{"process":{"env":[],"rlimits":[{"type":"RLIMIT_CORE"}]}}`), &s)
	var c config.Config
	_ = json.Unmarshal([]byte(`{}`), &c)
	var r spec.Report
	_ = json.Unmarshal([]byte(`{}`), &r)
	for _, f := range []facts.Helper{&facts.Enter{}, &facts.Network{}, &facts.Seccomp{}, &facts.Drop{}, &facts.Exec{}} {
		_, _ = json.Marshal(f)
	}
}
