//go:build bench

package integration

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"
)

// TestToExecPhase times the helper's part of a cold launch with a
// pre-started helper: the reap's launch_us "to_exec" (the release byte to
// the helper's exec report) and the gaps between the helper's own step
// reports, medians over SANDBOXD_TOEXEC_N one-shots (default 60), spaced so
// that the helper pool has refilled before each. Figures only: nothing is
// asserted about time.
func TestToExecPhase(t *testing.T) {
	in := setup(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--warm-pool", "0"}})
	n := 60
	if v, err := strconv.Atoi(os.Getenv("SANDBOXD_TOEXEC_N")); err == nil && v > 0 {
		n = v
	}
	for i := 0; i < n; i++ {
		time.Sleep(150 * time.Millisecond) // the pool refills off the path
		if r := s.exec(py("print(1)")); r.ExitCode == nil || *r.ExitCode != 0 {
			t.Fatalf("exec %d: %+v", i, r)
		}
	}
	recs := s.auditRecords()
	tus := helperStepTimes(recs)
	var toExec []float64
	var pooled int
	for _, r := range recs {
		f, _ := r["facts"].(map[string]any)
		if lu, _ := f["launch_us"].(map[string]any); r["step"] == "reap" && lu != nil {
			if p, _ := f["helper_pooled"].(bool); p {
				pooled++
				v, _ := lu["to_exec"].(float64)
				toExec = append(toExec, v/1000)
			}
		}
	}
	if pooled == 0 {
		t.Fatalf("no exec took a pre-started helper")
	}
	fmt.Printf("to_exec (pre-started helper, %d execs): median %.2f ms\n", pooled, median(toExec))
	for i := 1; i < len(helperSteps); i++ {
		var gap []float64
		for _, m := range tus {
			a, okA := m[helperSteps[i-1]]
			b, okB := m[helperSteps[i]]
			if okA && okB {
				gap = append(gap, b-a)
			}
		}
		fmt.Printf("  helper %s→%s median %.3f ms\n", helperSteps[i-1], helperSteps[i], median(gap))
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	return v[len(v)/2]
}

// helperStepTimes are the helper's report times (t_us, in ms) by exec id
// and step, from an audit log's records.
func helperStepTimes(recs []map[string]any) map[string]map[string]float64 {
	tus := map[string]map[string]float64{}
	for _, r := range recs {
		id, _ := r["exec_id"].(string)
		f, _ := r["facts"].(map[string]any)
		if v, ok := f["t_us"].(float64); ok && r["source"] == "nsinit" {
			if tus[id] == nil {
				tus[id] = map[string]float64{}
			}
			tus[id][r["step"].(string)] = v / 1000
		}
	}
	return tus
}
