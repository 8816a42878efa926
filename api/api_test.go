package api

import (
	"reflect"
	"testing"
)

// TestHealthChecksList: List names every check, in the JSON order, with
// its value; Ready gates on all but cgroups.
func TestHealthChecksList(t *testing.T) {
	h := HealthChecks{Bwrap: "b", Userns: "u", Seccomp: "s", Helper: "h", Cgroups: "c", Disk: "d", Archive: "a"}
	var names, values []string
	for _, c := range h.List() {
		names, values = append(names, c.Name), append(values, c.Value)
	}
	var want []string
	for f := range jsonFields(reflect.TypeFor[HealthChecks]()) {
		want = append(want, f.name)
	}
	if !reflect.DeepEqual(names, want) || !reflect.DeepEqual(values, []string{"b", "u", "s", "h", "c", "d", "a"}) {
		t.Fatalf("List names %v values %v; JSON fields %v", names, values, want)
	}
	ok := HealthChecks{Bwrap: CheckOK, Userns: CheckOK, Seccomp: CheckOK, Helper: CheckOK, Cgroups: "none", Disk: CheckOK}
	if !ok.Ready() {
		t.Fatal("cgroups none must not gate readiness")
	}
	for i := range 7 {
		bad := ok
		f := reflect.ValueOf(&bad).Elem().Field(i)
		f.SetString("broken")
		name := reflect.TypeFor[HealthChecks]().Field(i).Name
		if bad.Ready() == (name != "Cgroups" && name != "Archive") { // degraded, not down
			t.Errorf("Ready() with %s broken = %v", reflect.TypeFor[HealthChecks]().Field(i).Name, bad.Ready())
		}
	}
}

func TestErrorCodes(t *testing.T) {
	seen := map[int]int{}
	for _, c := range Codes() {
		if !c.Known() {
			t.Errorf("%s not Known", c)
		}
		seen[c.Status()]++
	}
	// Each code has its own status.
	if len(seen) != len(Codes()) {
		t.Errorf("statuses %v: two codes share one", seen)
	}
	if ErrorCode("nope").Known() || ErrorCode("nope").Status() != 500 {
		t.Error("an unknown code must be unknown and answered as internal")
	}
}
