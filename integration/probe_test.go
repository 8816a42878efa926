package integration

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/audit"
)

// TestAuditProbeTrail (issue 9 item 9): a health probe is a real launch,
// and it leaves an exec's whole trail -- accept, decide, prepare, the
// helper's five steps, reap -- every supervisor record marked probe: true,
// all attributed to the peer that asked for /v1/health (here the service
// user, through sandboxctl), never to uid 0 by default. audit verify counts
// it as a probe, not as an exec. Before, the trail was the helper's five
// records only, attributed to uid 0 pid 0.
func TestAuditProbeTrail(t *testing.T) {
	in := setup(t)
	path := auditLogPath(in)
	s := in.startSupervisor(t, supervisorOpts{extra: []string{"--audit-log", path}})
	cmd := exec.Command(in.path("bin/sandboxctl"), "health", "--socket", s.socket)
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(in.uid), Gid: uint32(in.gid), Groups: []uint32{}}}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sandboxctl health as uid %d: %v\n%s", in.uid, err, out)
	}
	s.stop()
	recs := auditRead(t, path)
	var id string
	for _, r := range recs {
		if strings.HasPrefix(r.ExecID, "probe-") {
			id = r.ExecID
			break
		}
	}
	if id == "" {
		t.Fatal("no probe records")
	}
	trail := auditExec(recs, id)
	if got, want := auditSteps(trail), "accept decide prepare enter network seccomp drop exec reap"; got != want {
		t.Fatalf("probe trail %q, want %q", got, want)
	}
	for _, r := range trail {
		if r.CallerUID != in.uid || r.CallerGID != in.gid || r.CallerPID <= 0 {
			t.Errorf("%s record attributed to uid %d gid %d pid %d, want the health request's peer (uid %d)", r.Step, r.CallerUID, r.CallerGID, r.CallerPID, in.uid)
		}
		if r.Source == audit.SourceSupervisor && r.FactMap()["probe"] != true {
			t.Errorf("%s record not marked as a probe: %v", r.Step, r.Facts)
		}
	}
	if enter := auditStep(trail, audit.StepEnter); enter.FactMap()["probe"] != true {
		t.Errorf("the helper's enter record does not say probe: %v", enter.Facts)
	}
	out, code := sandboxctlAudit(t, in, "verify", path)
	if code != 0 || !strings.Contains(out, "probes      1 health probes") || !strings.Contains(out, "0 accepted") {
		t.Errorf("verify: exit %d\n%s", code, out)
	}
}
