package supervisor

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/internal/testutil"
)

const peerHelperEnv = "SANDBOXD_TEST_PEER_SOCKET"

// peerChild is the client half of TestPeerCredentialsOverSocket, run by
// TestMain in a child process with other credentials. It prints the status
// and body of GET /v1/health.
func peerChild(sock string) {
	resp, err := unixClient(sock).Get("http://sandboxd/v1/health")
	if err != nil {
		fmt.Printf("ERR=%v\n", err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("STATUS=%d\nBODY=%s\n", resp.StatusCode, b)
}

// TestPeerCredentialsOverSocket checks authorisation with real SO_PEERCRED
// credentials of a process that is neither root nor the supervisor's uid.
func TestPeerCredentialsOverSocket(t *testing.T) {
	testutil.RequireRoot(t, "run a process under another uid")
	const nobody = 65534
	dir, bin := selfCopy(t, "sbxpeer-")

	run := func(t *testing.T, sock string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin)
		cmd.Env = []string{peerHelperEnv + "=" + sock, "PATH=/usr/bin:/bin", "HOME=/"}
		cmd.Dir = "/"
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("peer helper: %v\n%s", err, out)
		}
		return string(out)
	}

	tests := []struct {
		name       string
		allowUIDs  []int
		allowGIDs  []int
		wantStatus string
	}{
		{"stranger is forbidden", nil, nil, "STATUS=403"},
		{"allowed uid", []int{nobody}, nil, "STATUS=200"},
		{"allowed primary gid", nil, []int{nobody}, "STATUS=200"},
		{"other ids allowed only", []int{1000}, []int{1000}, "STATUS=403"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			cfg.AllowUIDs, cfg.AllowGIDs = tc.allowUIDs, tc.allowGIDs
			sock := filepath.Join(dir, fmt.Sprintf("s%d.sock", i))
			// Group nobody: the 0660 socket admits the child, and the
			// decision is left to the peer credentials.
			ts := startServerAt(t, sock, fmt.Sprint(nobody), cfg, nil, readyChecks())
			out := run(t, sock)
			if !strings.Contains(out, tc.wantStatus+"\n") {
				t.Fatalf("want %s, got:\n%s", tc.wantStatus, out)
			}
			if tc.wantStatus != "STATUS=403" {
				return
			}
			if !strings.Contains(out, `"code":"forbidden"`) || !strings.Contains(out, "uid 65534") {
				t.Fatalf("403 body:\n%s", out)
			}
			var refused []audit.Record
			for _, r := range ts.sink.Records {
				if r.Step == audit.StepAccept && !r.OK {
					refused = append(refused, r)
				}
			}
			if len(refused) != 1 || refused[0].CallerUID != nobody || refused[0].CallerGID != nobody || refused[0].FactMap()["path"] != "/v1/health" {
				t.Fatalf("forbidden request not audited with the caller: %+v", refused)
			}
		})
	}
}
