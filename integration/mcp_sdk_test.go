package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// TestMCPOfficialSDK: the official MCP TypeScript SDK's client
// (@modelcontextprotocol/sdk, pinned in mcp/sdktest/package-lock.json)
// drives `sandboxctl mcp` against the real supervisor: initialize,
// tools/list with every input schema compiled, run_code one-shot and in a
// session, files both ways, a chart as a PNG image, a download too large
// for one message refused while the connection stays up, cancellation, and
// shutdown (mcp/sdktest/mcp.test.mjs).
func TestMCPOfficialSDK(t *testing.T) {
	in := setup(t)
	dir := filepath.Join(in.repo, "mcp", "sdktest")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
		testutil.SkipOrFail(t, "the MCP SDK is not installed: run `make node-deps` (make test does)")
		return
	}
	s := in.startSupervisor(t, supervisorOpts{})
	cmd := exec.Command("node", "--test", "--test-reporter=spec", "mcp.test.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SANDBOXCTL="+in.path("bin/sandboxctl"), "SANDBOXD_SOCKET="+s.socket)
	out, finished, err := combinedWithin(cmd, 5*time.Minute)
	if !finished {
		t.Fatalf("the SDK test did not finish in 5 minutes:\n%s", out)
	}
	t.Logf("node --test mcp.test.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the official MCP SDK client failed against sandboxctl mcp: %v", err)
	}
}
