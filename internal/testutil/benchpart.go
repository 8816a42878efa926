package testutil

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// WriteBenchPart writes figs as NAME.json into $SANDBOXD_BENCH_OUT when it
// is set (`make bench` sets it): TestBench merges every part it finds there
// into its one BENCH_JSON line, under NAME.
func WriteBenchPart(t testing.TB, name string, figs any) {
	t.Helper()
	dir := os.Getenv("SANDBOXD_BENCH_OUT")
	if dir == "" {
		return
	}
	b, err := json.Marshal(figs)
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, name+".json"), b, 0o644)
	}
	if err != nil {
		t.Fatalf("write the bench figures %s: %v", name, err)
	}
}
