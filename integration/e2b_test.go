package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestE2BOfficialSDK: the official E2B code interpreter SDK
// (@e2b/code-interpreter, pinned in e2b/sdktest/package-lock.json) runs its
// documented examples unmodified against --e2b-listen of the real
// supervisor, with API keys: create, run code, state across calls, a
// matplotlib chart as PNG, a pandas DataFrame as HTML, per-call env, a
// streamed loop, JavaScript, a file round trip, an error with its
// traceback, contexts, another key and a wrong token refused, and kill
// (e2b/sdktest/e2b.test.mjs). The audit trail shows the calls under the
// key's name, as for --listen.
func TestE2BOfficialSDK(t *testing.T) {
	in := setup(t)
	dir := filepath.Join(in.repo, "e2b", "sdktest")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@e2b", "code-interpreter", "package.json")); err != nil {
		testutil.SkipOrFail(t, "the E2B SDK is not installed: run `make node-deps` (make test does)")
		return
	}
	keys := writeOwned(t, in, "keys", []byte("alice:"+itKeyAlice+"\nbob:"+itKeyBob+"\n"), 0o600)
	addr := "127.0.0.1:" + freePort(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--e2b-listen", addr, "--api-keys-file", keys}})
	waitTCP(t, s, addr)
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "--test-concurrency=1", "e2b.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "E2B_API_URL=http://"+addr, "E2B_SANDBOX_URL=http://"+addr,
		"E2B_API_KEY="+itKeyAlice, "E2B_OTHER_KEY="+itKeyBob)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the SDK test did not finish in 5 minutes:\n%s", out)
	}
	t.Logf("node --test e2b.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the official E2B SDK failed against --e2b-listen: %v\nsupervisor log:\n%s", err, s.logs)
	}
	found := map[string]bool{}
	for _, r := range s.auditRecords() {
		if c, _ := r["caller"].(string); c != "" {
			found[c+" "+r["step"].(string)] = true
		}
	}
	for _, want := range []string{"key:alice session.create", "key:alice kernel_exec", "key:alice file.put", "key:alice session.delete"} {
		if !found[want] {
			t.Errorf("no audit record %q; have %v", want, found)
		}
	}
}
