package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testca"
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
// key's name, as for --listen. The listener speaks TLS (--tls-cert), as
// --listen does.
func TestE2BOfficialSDK(t *testing.T) {
	in := setup(t)
	dir := filepath.Join(in.repo, "e2b", "sdktest")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@e2b", "code-interpreter", "package.json")); err != nil {
		testutil.SkipOrFail(t, "the E2B SDK is not installed: run `make node-deps` (make test does)")
		return
	}
	keys := writeOwned(t, in, "keys", []byte("alice:"+itKeyAlice+"\nbob:"+itKeyBob+"\n"), 0o600)
	// The TLS of --listen applies to --e2b-listen: the SDK speaks HTTPS,
	// trusting the test CA.
	certs := ownedDir(t, in)
	ca := testca.New(t, "it CA")
	srvCert, srvKey := ca.WriteLeaf(t, certs, testca.Leaf{Name: "server", Serial: 100, IPs: loopback})
	caFile := ca.WriteCA(t, certs)
	chownAll(t, in, srvCert, srvKey, caFile)
	addr := "127.0.0.1:" + freePort(t)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--e2b-listen", addr, "--api-keys-file", keys,
		"--tls-cert", srvCert, "--tls-key", srvKey}})
	waitTCP(t, s, addr)
	env := append(os.Environ(), "E2B_API_URL=https://"+addr, "E2B_SANDBOX_URL=https://"+addr,
		"E2B_API_KEY="+itKeyAlice, "E2B_OTHER_KEY="+itKeyBob, "NODE_EXTRA_CA_CERTS="+caFile)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runLogged(t, ctx, dir, env, "node", "--test", "--test-reporter=spec", "--test-concurrency=1", "e2b.test.mjs")
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

// TestE2BRefusesToStart: --e2b-listen is held to the rules of --listen: no
// listener without API keys, and without keys (--allow-no-auth) loopback
// only.
func TestE2BRefusesToStart(t *testing.T) {
	in := setup(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--e2b-listen", "127.0.0.1:" + freePort(t)}, "refusing to listen on TCP without API keys"},
		{[]string{"--e2b-listen", "0.0.0.0:" + freePort(t), "--allow-no-auth"}, "is not a loopback address"},
		{[]string{"--e2b-listen", "127.0.0.1:99999", "--allow-no-auth"}, "not in 0..65535"},
	} {
		if out := refusesToStart(t, in, nil, tc.args...); !strings.Contains(out, tc.want) {
			t.Errorf("%v: want %q in:\n%s", tc.args, tc.want, out)
		}
	}
}
