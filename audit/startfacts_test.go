package audit

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestStartFactsRecorded: the supervisor's settings given as StartFacts
// are the start record's facts under the names SCHEMA.md gives them.
func TestStartFactsRecorded(t *testing.T) {
	dir := t.TempDir()
	w, err := Open(filepath.Join(dir, "audit.log"), Options{StartFacts: &StartFacts{Socket: "/run/s.sock",
		StateDir: "/var/lib/s", Helper: "/usr/libexec/nsinit", HelperConfig: "/etc/n.json", AuditEnvValues: true}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var start map[string]any
	if _, err := ReadRecords(os.DirFS(dir), []string{"audit.log"}, func(_ string, _ int, r Record) {
		if r.Step == StepStart {
			start = r.FactMap()
		}
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"socket": "/run/s.sock", "state_dir": "/var/lib/s", "helper": "/usr/libexec/nsinit",
		"helper_config": "/etc/n.json", "audit_env_values": true}
	for k, v := range want {
		if !reflect.DeepEqual(start[k], v) {
			t.Errorf("start fact %s = %v, want %v (facts %v)", k, start[k], v, start)
		}
	}
}
