package nsinit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// TestWarmUp: after warmUp, decoding a spec costs what a cached codec
// costs; the figure printed is what warmUp takes off a launch.
func TestWarmUp(t *testing.T) {
	start := time.Now()
	warmUp()
	took := time.Since(start)
	start = time.Now()
	var s spec.LaunchSpec
	if err := json.Unmarshal([]byte(`{"version":1,"exec_id":"x","process":{"env":["A=b"]}}`), &s); err != nil {
		t.Fatal(err)
	}
	t.Logf("warmUp %v; a spec decoded after it %v", took, time.Since(start))
	if s.ExecID != "x" || len(s.Process.Env) != 1 {
		t.Fatalf("decoded %+v", s)
	}
}
