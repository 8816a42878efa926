package launch

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sandboxd/sandboxd/api"
)

// TestReapFactsAsBefore: the typed reap facts of a launch marshal to the
// members the map literal they replaced wrote, under the same names and
// with the same values; only a false flag or a null outcome is left out
// (the schema's omitzero: absent is false or none).
func TestReapFactsAsBefore(t *testing.T) {
	code := 3
	res := &ExecResult{ExitCode: &code, DurationMS: 120, StdoutTruncated: true,
		Usage: Usage{CPUMS: 300, MaxRSSKB: 204800, Source: api.UsageSourceCgroup}}
	hr := &helperRun{bwrap: bwrapOutcome{childPID: 4242}, stdout: &capturedStream{total: 70000},
		stderr: &capturedStream{total: 9}, reaperGone: true, cgroupLeft: 1, stop: stopExited}
	before := map[string]any{
		"exit_code": res.ExitCode, "signal": res.Signal, "timed_out": res.TimedOut,
		"duration_ms": res.DurationMS, "usage": res.Usage, "bwrap_child_pid": hr.bwrap.childPID,
		"stdout_bytes": hr.stdout.total, "stderr_bytes": hr.stderr.total,
		"stdout_truncated": res.StdoutTruncated, "stderr_truncated": res.StderrTruncated,
		"pid_namespace_gone": hr.reaperGone,
		"oom_killed":         hr.oomKilled, "cgroup_processes_left": hr.cgroupLeft,
		"quota_exceeded": res.QuotaExceeded, "stopped": hr.stop.String(),
	}
	typed := decodeJSON(t, reapFacts(res, hr))
	old := decodeJSON(t, before)
	for k, v := range old {
		if v == nil || v == false {
			delete(old, k) // omitzero in the typed schema
		}
	}
	if !reflect.DeepEqual(typed, old) {
		t.Fatalf("typed reap facts\n %v\nthe map wrote\n %v", typed, old)
	}
}

func decodeJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
