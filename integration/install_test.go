package integration

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

// installEnv is one run of `make install` into a root-owned temporary tree:
// every path and every user and group name of the installer points into
// the test's own namespace, so the host's real installation (/etc/sandboxd,
// /usr/local, the users sandboxd and sandboxd-ns) is never touched.
type installEnv struct {
	base string
	vars map[string]string
}

func newInstallEnv(t *testing.T) *installEnv {
	t.Helper()
	testutil.RequireRoot(t, "install sandboxd into a temporary prefix")
	base, err := os.MkdirTemp("/tmp", "sandboxd-install-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &installEnv{base: base, vars: map[string]string{
		"PREFIX":             filepath.Join(base, "prefix"),
		"NSINIT_CONFIG":      filepath.Join(base, "etc/nsinit.json"),
		"NSINIT_OWNER":       filepath.Join(base, "etc/nsinit.owner"),
		"SANDBOXD_STATE_DIR": filepath.Join(base, "state"),
		"SANDBOXD_SOCKET":    filepath.Join(base, "run/sandboxd.sock"),
		// Users and groups of their own, never the shared installation's
		// (testUser, testUser-ns), which other tests of this binary use.
		"SANDBOXD_USER":         testUser + "-i",
		"SANDBOXD_NS_USER":      testUser + "-i-ns",
		"SANDBOXD_HELPER_GROUP": testUser + "-i-hlp",
		"SANDBOXD_SOCKET_GROUP": testUser + "-i-cli",
	}}
	// Remove every user and group the installer made.
	t.Cleanup(func() {
		_ = exec.Command("userdel", e.vars["SANDBOXD_USER"]).Run()
		_ = exec.Command("userdel", e.vars["SANDBOXD_NS_USER"]).Run()
		_ = exec.Command("groupdel", e.vars["SANDBOXD_HELPER_GROUP"]).Run()
		_ = exec.Command("groupdel", e.vars["SANDBOXD_SOCKET_GROUP"]).Run()
	})
	return e
}

// makeInstall runs `make install` with bin/ as `make build` left it (-o
// build: the helper must not be rebuilt with the test's config path, other
// tests use bin/). It returns the combined output and whether it succeeded.
func (e *installEnv) makeInstall(t *testing.T) (string, bool) {
	t.Helper()
	args := []string{"--no-print-directory", "-C", repoRoot(t), "-o", "build", "install"}
	for k, v := range e.vars {
		args = append(args, k+"="+v)
	}
	cmd := exec.Command("make", args...)
	cmd.Env = os.Environ()
	for k, v := range e.vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("make install:\n%s", out.String())
	return out.String(), err == nil
}

// ownerMode is "uid:gid mode" of a path, not following a symlink.
func ownerMode(t *testing.T, path string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d %04o", st.Uid, st.Gid, st.Mode&0o7777)
}

// TestInstallKeepsExistingDirectories is issue 9 item 2: the old installer
// ran `install -d -o sandboxd -m 0755` on the socket's parent and the state
// directory, and GNU install applies owner and mode to a directory that
// already exists, so the README's SANDBOXD_SOCKET=/tmp/sbx.sock turned /tmp
// into sandboxd 0755 without its sticky bit. A pre-existing root-owned 1777
// directory, used as the socket's parent or as the state directory, must
// keep its owner and mode, and the installer must say why it refuses it.
func TestInstallKeepsExistingDirectories(t *testing.T) {
	for _, tc := range []struct {
		name, setting, file string
	}{
		{"socket parent", "SANDBOXD_SOCKET", "sbx.sock"},
		{"state dir", "SANDBOXD_STATE_DIR", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newInstallEnv(t)
			shared := filepath.Join(e.base, "shared-tmp")
			if err := os.Mkdir(shared, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
			before := ownerMode(t, shared)
			if before != "0:0 1777" {
				t.Fatalf("set-up: %s is %s, want 0:0 1777", shared, before)
			}
			e.vars[tc.setting] = filepath.Join(shared, tc.file)
			out, ok := e.makeInstall(t)
			if after := ownerMode(t, shared); after != before {
				t.Fatalf("make install changed the pre-existing %s from %s to %s", shared, before, after)
			}
			if ok {
				t.Fatalf("make install accepted the shared directory %s as sandboxd's own", shared)
			}
			if !strings.Contains(out, shared+" already exists as root:root 1777") || !strings.Contains(out, "Fix:") {
				t.Fatalf("the refusal does not name the directory and the fix:\n%s", out)
			}
			if _, err := os.Stat(e.vars["PREFIX"]); err == nil {
				t.Fatalf("make install installed files before refusing")
			}
		})
	}
}

// TestInstallRefusesSystemDirectories: /tmp and /run themselves are refused
// before anything is installed, whatever their owner and mode.
func TestInstallRefusesSystemDirectories(t *testing.T) {
	for setting, value := range map[string]string{
		"SANDBOXD_SOCKET":    "/tmp/sbx.sock",
		"SANDBOXD_STATE_DIR": "/var/lib",
	} {
		t.Run(setting, func(t *testing.T) {
			e := newInstallEnv(t)
			dir := value
			if setting == "SANDBOXD_SOCKET" {
				dir = filepath.Dir(value)
			}
			before := ownerMode(t, dir)
			e.vars[setting] = value
			out, ok := e.makeInstall(t)
			if after := ownerMode(t, dir); after != before {
				t.Fatalf("make install changed %s from %s to %s", dir, before, after)
			}
			if ok || !strings.Contains(out, "a shared system directory") {
				t.Fatalf("make install did not refuse %s=%s:\n%s", setting, value, out)
			}
			if _, err := os.Stat(e.vars["PREFIX"]); err == nil {
				t.Fatalf("make install installed files before refusing")
			}
		})
	}
}

// TestInstallRefusesOneGroupForHelperAndSocket: a member of the socket's
// group must never be able to run the helper (issue 9 item 5).
func TestInstallRefusesOneGroupForHelperAndSocket(t *testing.T) {
	e := newInstallEnv(t)
	e.vars["SANDBOXD_SOCKET_GROUP"] = e.vars["SANDBOXD_HELPER_GROUP"]
	out, ok := e.makeInstall(t)
	if ok || !strings.Contains(out, "could run the helper directly") {
		t.Fatalf("make install accepted one group for the helper and the socket:\n%s", out)
	}
}

// TestInstallRefusesSharedPrimaryGroup: a service user whose primary group
// another user shares would let that user act on everything the group may.
func TestInstallRefusesSharedPrimaryGroup(t *testing.T) {
	e := newInstallEnv(t)
	svc, other := e.vars["SANDBOXD_USER"], e.vars["SANDBOXD_USER"]+"x"
	if out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--shell", "/usr/sbin/nologin", svc).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
	if out, err := exec.Command("useradd", "--system", "--no-user-group", "--gid", svc, "--no-create-home", "--shell", "/usr/sbin/nologin", other).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("userdel", other).Run() })
	out, ok := e.makeInstall(t)
	if ok || !strings.Contains(out, "which it shares with: "+other) {
		t.Fatalf("make install accepted a shared primary group:\n%s", out)
	}
}

// TestInstallLayout is a whole install into the temporary tree: the
// groups, the helper's owner, mode and capabilities, the namespace-owner
// file helper A's prelude reads, and the state layout whose workspace
// root has a root-owned parent. A second run changes nothing and succeeds.
func TestInstallLayout(t *testing.T) {
	e := newInstallEnv(t)
	for run := 1; run <= 2; run++ {
		if out, ok := e.makeInstall(t); !ok {
			t.Fatalf("make install (run %d) failed:\n%s", run, out)
		}
	}
	v := e.vars
	svc, err := user.Lookup(v["SANDBOXD_USER"])
	if err != nil {
		t.Fatal(err)
	}
	ns, err := user.Lookup(v["SANDBOXD_NS_USER"])
	if err != nil {
		t.Fatal(err)
	}
	hg, err := user.LookupGroup(v["SANDBOXD_HELPER_GROUP"])
	if err != nil {
		t.Fatal(err)
	}
	sg, err := user.LookupGroup(v["SANDBOXD_SOCKET_GROUP"])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(v["PREFIX"], "libexec/sandboxd/sandboxd-nsinit")
	state := v["SANDBOXD_STATE_DIR"]
	want := map[string]string{
		helper:                                     "0:" + hg.Gid + " 0750",
		v["NSINIT_CONFIG"]:                         "0:0 0644",
		v["NSINIT_OWNER"]:                          "0:0 0644",
		state:                                      "0:0 0755",
		filepath.Join(state, "workspaces"):         svc.Uid + ":" + svc.Gid + " 0700",
		filepath.Join(state, "sessions"):           svc.Uid + ":" + svc.Gid + " 0700",
		filepath.Join(state, "audit"):              svc.Uid + ":" + svc.Gid + " 0700",
		filepath.Dir(v["SANDBOXD_SOCKET"]):         svc.Uid + ":" + svc.Gid + " 0755",
		filepath.Join(v["PREFIX"], "bin/sandboxd"): "0:0 0755",
	}
	for p, w := range want {
		if got := ownerMode(t, p); got != w {
			t.Errorf("%s is %s, want %s", p, got, w)
		}
	}
	caps, err := exec.Command("getcap", helper).CombinedOutput()
	if err != nil {
		t.Fatalf("getcap: %v: %s", err, caps)
	}
	if got := strings.Fields(string(caps)); len(got) != 2 || got[1] != "cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin=p" {
		t.Errorf("helper capabilities %q, want cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin=p", caps)
	}
	owner, err := os.ReadFile(v["NSINIT_OWNER"])
	if err != nil {
		t.Fatal(err)
	}
	if string(owner) != ns.Uid+":"+ns.Gid+"\n" {
		t.Errorf("owner file %q, want %q", owner, ns.Uid+":"+ns.Gid+"\n")
	}
	// The helper group holds the service user alone; the namespace owner
	// is in no group but its own; the service user is in both groups.
	if got := groupMembers(t, hg.Gid); !slices.Equal(got, []string{svc.Username}) {
		t.Errorf("helper group members %v, want only %s", got, svc.Username)
	}
	if gids, _ := ns.GroupIds(); !slices.Equal(gids, []string{ns.Gid}) {
		t.Errorf("namespace owner groups %v, want only its own %s", gids, ns.Gid)
	}
	gids, _ := svc.GroupIds()
	if !slices.Contains(gids, hg.Gid) || !slices.Contains(gids, sg.Gid) {
		t.Errorf("service user groups %v lack the helper group %s or the socket group %s", gids, hg.Gid, sg.Gid)
	}
	if ns.Uid == svc.Uid || hg.Gid == sg.Gid || hg.Gid == svc.Gid || sg.Gid == svc.Gid {
		t.Errorf("ids not distinct: service %s:%s, ns %s, helper group %s, socket group %s", svc.Uid, svc.Gid, ns.Uid, hg.Gid, sg.Gid)
	}
}

// groupMembers lists the users whose primary or supplementary group is gid.
func groupMembers(t *testing.T, gid string) []string {
	t.Helper()
	var out []string
	for _, db := range []string{"/etc/passwd", "/etc/group"} {
		b, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			f := strings.Split(line, ":")
			switch {
			case db == "/etc/passwd" && len(f) >= 4 && f[3] == gid:
				out = append(out, f[0])
			case db == "/etc/group" && len(f) >= 4 && f[2] == gid && f[3] != "":
				out = append(out, strings.Split(f[3], ",")...)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
