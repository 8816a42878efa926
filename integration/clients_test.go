package integration

// The Python and TypeScript SDKs (clients/) against the real supervisor:
// each SDK's own test suite runs as a child process, over the socket and
// over an HTTPS listener with an API key, with the SDK installed the way
// its README says (pip into a fresh venv, offline; npm ci and tsc).

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testca"
)

// sdkSupervisor starts a supervisor for the SDK suites: the socket, and an
// HTTPS listener with the test keys. Each caller holds one exec slot
// (--max-concurrent-execs 2) and nothing queues, so an exec while the
// caller's other exec runs is a 429 at once: the suites' RateLimited test.
// It returns the environment the suites read.
func sdkSupervisor(t *testing.T) []string {
	t.Helper()
	in := setup(t)
	dir := ownedDir(t, in)
	ca := testca.New(t, "sdk CA")
	srvCert, srvKey := ca.WriteLeaf(t, dir, testca.Leaf{Name: "server", Serial: 300, IPs: loopback})
	caFile := ca.WriteCA(t, dir)
	chownAll(t, in, srvCert, srvKey, caFile)
	s := startTCPSupervisor(t, in, "https", "--tls-cert", srvCert, "--tls-key", srvKey,
		"--max-concurrent-execs", "2", "--max-queued-execs", "0")
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SANDBOXD_") && !strings.HasPrefix(kv, "CI=") {
			env = append(env, kv)
		}
	}
	// CI=true: a suite that cannot find the supervisor fails, never skips.
	return append(env, "CI=true", "SANDBOXD_SOCKET="+s.socket, "SANDBOXD_TEST_URL="+s.url,
		"SANDBOXD_TEST_API_KEY="+itKeyAlice, "SANDBOXD_TEST_CA_FILE="+caFile)
}

// runLogged runs a command with env in dir, logs its output, and fails the
// test when it fails.
func runLogged(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s (%v):\n%s", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return string(out)
}

// TestClientSDKs runs clients/python/tests (python3 -m unittest, the SDK
// pip-installed into a venv without an index) and clients/typescript's
// tests (node --test, after tsc) against one supervisor.
func TestClientSDKs(t *testing.T) {
	env := sdkSupervisor(t)
	repo := repoRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	t.Run("python", func(t *testing.T) {
		// SANDBOXD_IT_PYTHON runs the suite with another interpreter
		// (the SDK supports Python 3.9 and later).
		python := os.Getenv("SANDBOXD_IT_PYTHON")
		if python == "" {
			python = "python3"
		}
		venv := filepath.Join(t.TempDir(), "venv")
		runLogged(t, ctx, repo, env, python, "-m", "venv", venv)
		// --no-index: the install must work offline (the build backend is
		// in the tree and needs no package).
		runLogged(t, ctx, repo, env, filepath.Join(venv, "bin/pip"), "install", "--no-index", "--no-cache-dir", "-q", "./clients/python")
		out := runLogged(t, ctx, filepath.Join(repo, "clients/python/tests"), env,
			filepath.Join(venv, "bin/python"), "-m", "unittest", "-v", "test_sdk")
		if strings.Contains(out, "skipped") {
			t.Fatalf("a Python SDK test skipped:\n%s", out)
		}
	})

	t.Run("typescript", func(t *testing.T) {
		ts := filepath.Join(repo, "clients/typescript")
		if _, err := os.Stat(filepath.Join(ts, "node_modules/.bin/tsc")); err != nil {
			// make test runs npm ci first (make clients); a bare go test does it here.
			runLogged(t, ctx, ts, env, "npm", "ci", "--no-audit", "--no-fund")
		}
		runLogged(t, ctx, ts, env, "npm", "run", "--silent", "build")
		out := runLogged(t, ctx, ts, env, "node", "--test", "--test-reporter=tap", "dist/test/sdk.test.js")
		if !strings.Contains(out, "\n# skipped 0\n") || !strings.Contains(out, "\n# fail 0\n") {
			t.Fatalf("a TypeScript SDK test skipped or failed:\n%s", out)
		}
	})
}
