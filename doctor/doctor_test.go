package doctor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

const (
	helperPath = "/usr/local/libexec/sandboxd/sandboxd-nsinit"
	cfgPath    = "/etc/sandboxd/nsinit.json"
	profPath   = "/etc/sandboxd/profiles/payload.json"
	sockPath   = "/run/sandboxd/sandboxd.sock"
	profJSON   = `{"defaultAction":"SCMP_ACT_ERRNO","syscalls":[]}`
)

// fakeHost is a machine made of maps.
type fakeHost struct {
	files     map[string]string
	stats     map[string]FileInfo
	dirs      map[string][]string
	caps      map[string][]byte
	run       map[string]string
	cfg       *config.Config
	cfgErr    error
	notRoot   map[string]error
	sup       *Supervisor
	supErr    error
	cgMode    string
	cgReason  string
	cgAskedAt string
}

var errNotExist = fmt.Errorf("stat: %w", fs.ErrNotExist)

func (h *fakeHost) ReadFile(p string) ([]byte, error) {
	if s, ok := h.files[p]; ok {
		return []byte(s), nil
	}
	return nil, errNotExist
}

func (h *fakeHost) Stat(p string) (FileInfo, error) {
	if st, ok := h.stats[p]; ok {
		return st, nil
	}
	return FileInfo{}, errNotExist
}

func (h *fakeHost) Lstat(p string) (FileInfo, error) { return h.Stat(p) }

func (h *fakeHost) ReadDir(p string) ([]string, error) {
	if d, ok := h.dirs[p]; ok {
		return d, nil
	}
	return nil, errNotExist
}

func (h *fakeHost) FileCaps(p string) ([]byte, error) { return h.caps[p], nil }

func (h *fakeHost) LookPath(name string) (string, error) { return "/usr/bin/" + name, nil }

func (h *fakeHost) Run(_ context.Context, p string, args ...string) ([]byte, error) {
	if out, ok := h.run[p]; ok {
		return []byte(out), nil
	}
	return nil, errors.New("exec: not found")
}

func (h *fakeHost) GroupName(gid uint32) string {
	switch gid {
	case 995:
		return "sandboxd-helper"
	case 996:
		return "sandboxd-clients"
	case 999:
		return "sandboxd"
	}
	return fmt.Sprint(gid)
}

func (h *fakeHost) LoadHelperConfig(string) (*config.Config, error) { return h.cfg, h.cfgErr }

func (h *fakeHost) CheckRootOwned(p string) error { return h.notRoot[p] }

func (h *fakeHost) Supervisor(context.Context, string) (*Supervisor, error) { return h.sup, h.supErr }

func (h *fakeHost) Cgroups(procDir string, uid int, parent string) (string, string) {
	h.cgAskedAt = fmt.Sprintf("%s uid %d parent %s", procDir, uid, parent)
	return h.cgMode, h.cgReason
}

// capsV2 encodes a revision-2 security.capability attribute.
func capsV2(permitted uint64, effective bool) []byte {
	b := make([]byte, 20)
	magic := uint32(vfsCapRevision2)
	if effective {
		magic |= vfsCapFlagsEff
	}
	binary.LittleEndian.PutUint32(b, magic)
	binary.LittleEndian.PutUint32(b[4:], uint32(permitted))
	binary.LittleEndian.PutUint32(b[12:], uint32(permitted>>32))
	return b
}

func procStatus(nnp, capBnd string, seccomp string) string {
	return fmt.Sprintf("Name:\tsandboxd\nUid:\t999\t999\t999\t999\nGid:\t999\t999\t999\t999\nGroups:\t995 996\nCapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t%s\nCapAmb:\t0000000000000000\nNoNewPrivs:\t%s\nSeccomp:\t%s\n", capBnd, nnp, seccomp)
}

func cacheFor(profile string) string {
	sum := sha256.Sum256([]byte(profile))
	return fmt.Sprintf("SANDBOXD-BPF 1 %s %s\n", hex.EncodeToString(sum[:]), runtime.GOARCH) + strings.Repeat("\x00", 64)
}

// healthyHost is a machine on which every check passes.
func healthyHost() *fakeHost {
	reg := func(mode fs.FileMode, uid, gid uint32) FileInfo { return FileInfo{Mode: mode, UID: uid, GID: gid} }
	cfg := config.Default("/var/lib/sandboxd/workspaces", "/usr/local/libexec/sandboxd/sandboxd-exec", profPath)
	return withDatascience(&fakeHost{
		files: map[string]string{
			"/proc/sys/user/max_user_namespaces":     "15000\n",
			"/proc/self/status":                      procStatus("0", "000001ffffffffff", "0"),
			"/proc/sys/kernel/seccomp/actions_avail": "kill_process kill_thread trap errno user_notif trace log allow\n",
			profPath:                                 profJSON,
			profPath + ".bpf":                        cacheFor(profJSON),
			"/proc/4242/status":                      procStatus("0", "00000000002010c0", "2"),
			"/etc/passwd":                            "root:x:0:0:root:/root:/bin/bash\nsandboxd:x:999:999::/nonexistent:/usr/sbin/nologin\nsandboxd-ns:x:998:998::/nonexistent:/usr/sbin/nologin\n",
			"/etc/group":                             "root:x:0:\nsandboxd:x:999:\nsandboxd-ns:x:998:\nsandboxd-helper:x:995:sandboxd\nsandboxd-clients:x:996:sandboxd\n",
			"/sys/fs/cgroup/cgroup.controllers":      "cpuset cpu io memory pids\n",
			"/proc/self/mountinfo":                   "30 1 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
		},
		stats: map[string]FileInfo{
			helperPath: reg(0o750, 0, 995),
			"/usr/local/libexec/sandboxd/sandboxd-exec": reg(0o755, 0, 0),
			"/usr/bin/bwrap":               reg(0o755, 0, 0),
			"/usr/bin/python3":             reg(0o755, 0, 0),
			"/usr/bin/node":                reg(0o755, 0, 0),
			profPath:                       reg(0o644, 0, 0),
			profPath + ".bpf":              reg(0o644, 0, 0),
			sockPath:                       reg(fs.ModeSocket|0o660, 999, 996),
			"/var/lib/sandboxd":            reg(fs.ModeDir|0o755, 0, 0),
			"/var/lib/sandboxd/workspaces": reg(fs.ModeDir|0o700, 999, 999),
		},
		dirs: map[string][]string{"/usr/local/libexec/sandboxd": {"sandboxd-nsinit", "sandboxd-exec"}},
		caps: map[string][]byte{helperPath: capsV2(HelperCaps, false)},
		run: map[string]string{
			"/usr/bin/bwrap":   "bubblewrap 0.8.0\n",
			"/usr/bin/python3": "Python 3.11.2\n",
			"/usr/bin/node":    "v18.19.0\n",
		},
		cfg:      &cfg,
		sup:      &Supervisor{PID: 4242, Health: Health{OK: true, Version: "0.1.0", Checks: api.HealthChecks{Bwrap: "ok", Cgroups: "v2"}}},
		cgMode:   "v2",
		cgReason: "cgroup v2 subtree /sys/fs/cgroup/system.slice/sandboxd.service/sandboxd",
	})
}

func opts() Options {
	return Options{HelperPath: helperPath, HelperConfigPath: cfgPath, SocketPath: sockPath, GOARCH: runtime.GOARCH}
}

func find(t *testing.T, rep Report, name string) Result {
	t.Helper()
	for _, r := range rep.Checks {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no check %q in %+v", name, rep.Checks)
	return Result{}
}

func TestHealthyHost(t *testing.T) {
	h := healthyHost()
	rep := Run(context.Background(), h, opts())
	for _, r := range rep.Checks {
		if r.Status != OK {
			t.Errorf("%s: %s: %s (fix: %s)", r.Name, r.Status, r.Detail, r.Fix)
		}
	}
	if !rep.OK {
		t.Error("report not OK")
	}
	if h.cgAskedAt != "/proc/4242 uid 999 parent sandboxd" {
		t.Errorf("cgroups asked for %q; want the supervisor's /proc dir and uid", h.cgAskedAt)
	}
	if got := find(t, rep, "helper.caps").Detail; !strings.Contains(got, "cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin=p") {
		t.Errorf("helper.caps detail %q", got)
	}
}

// TestChecks breaks one thing at a time and expects exactly the named
// check to say so, with the status and the words of its fix.
func TestChecks(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(h *fakeHost)
		check  string
		status Status
		detail string // substring of Detail
		fix    string // substring of Fix
	}{
		{"userns refused", func(h *fakeHost) { h.files["/proc/sys/user/max_user_namespaces"] = "0\n" },
			"userns", Fail, "refuses every user namespace", "echo 'user.max_user_namespaces = 15000' > /etc/sysctl.d/90-sandboxd.conf && sysctl --system"},
		{"no userns in kernel", func(h *fakeHost) { delete(h.files, "/proc/sys/user/max_user_namespaces") },
			"userns", Fail, "no user namespaces", "CONFIG_USER_NS"},
		{"few user namespaces", func(h *fakeHost) { h.files["/proc/sys/user/max_user_namespaces"] = "10" },
			"userns", Warn, "concurrent execs", "sysctl --system"},
		{"debian restriction, helper privileged", func(h *fakeHost) { h.files["/proc/sys/kernel/unprivileged_userns_clone"] = "0\n" },
			"userns", OK, "fine: the helper creates the namespace with its CAP_SYS_ADMIN", ""},
		{"debian restriction, helper unprivileged", func(h *fakeHost) {
			h.files["/proc/sys/kernel/unprivileged_userns_clone"] = "0\n"
			delete(h.caps, helperPath)
		}, "userns", Fail, "kernel.unprivileged_userns_clone = 0 (Debian)", "echo 'kernel.unprivileged_userns_clone = 1' > /etc/sysctl.d/90-sandboxd.conf && sysctl --system"},
		{"ubuntu restriction, helper unprivileged", func(h *fakeHost) {
			h.files["/proc/sys/kernel/apparmor_restrict_unprivileged_userns"] = "1\n"
			delete(h.caps, helperPath)
		}, "userns", Fail, "apparmor_restrict_unprivileged_userns = 1 (Ubuntu)", "echo 'kernel.apparmor_restrict_unprivileged_userns = 0' > /etc/sysctl.d/90-sandboxd.conf && sysctl --system"},
		{"bwrap missing", func(h *fakeHost) { delete(h.stats, "/usr/bin/bwrap") },
			"bwrap", Fail, "missing at /usr/bin/bwrap", "apt-get install bubblewrap"},
		{"bwrap too old", func(h *fakeHost) { h.run["/usr/bin/bwrap"] = "bubblewrap 0.4.1\n" },
			"bwrap", Fail, "needs bubblewrap 0.8.0 or newer", "0.8.0"},
		{"bwrap newer", func(h *fakeHost) { h.run["/usr/bin/bwrap"] = "bubblewrap 0.11.0\n" },
			"bwrap", OK, "bubblewrap 0.11.0", ""},
		{"bwrap writable", func(h *fakeHost) {
			h.notRoot = map[string]error{"/usr/bin/bwrap": errors.New(`"/usr/bin/bwrap" is writable by group or others`)}
		},
			"bwrap", Fail, "the helper refuses /usr/bin/bwrap", "chown root:root /usr/bin/bwrap"},
		{"bwrap setuid", func(h *fakeHost) { h.stats["/usr/bin/bwrap"] = FileInfo{Mode: 0o755 | fs.ModeSetuid} },
			"bwrap", Warn, "setuid root", "chmod u-s /usr/bin/bwrap"},
		{"helper missing", func(h *fakeHost) { delete(h.stats, helperPath) },
			"helper", Fail, "missing", "make install"},
		{"helper setuid", func(h *fakeHost) { h.stats[helperPath] = FileInfo{Mode: 0o750 | fs.ModeSetuid, GID: 995} },
			"helper", Fail, "setuid or setgid", "chmod 0750"},
		{"helper world-executable", func(h *fakeHost) { h.stats[helperPath] = FileInfo{Mode: 0o755, GID: 995} },
			"helper", Fail, "others may read or run it", "chown root:sandboxd-helper " + helperPath},
		{"helper not root-owned", func(h *fakeHost) { h.stats[helperPath] = FileInfo{Mode: 0o750, UID: 999, GID: 995} },
			"helper", Fail, "owned by uid 999, not root", "setcap " + HelperSetcap},
		{"helper without caps", func(h *fakeHost) { delete(h.caps, helperPath) },
			"helper.caps", Fail, "has no file capabilities", "setcap " + HelperSetcap + " " + helperPath},
		{"helper with the old two caps", func(h *fakeHost) { h.caps[helperPath] = capsV2(1<<capSysAdmin|1<<capNetAdmin, true) },
			"helper.caps", Fail, "cap_net_admin,cap_sys_admin=ep; want exactly cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin=p", HelperSetcap},
		{"helper with extra caps", func(h *fakeHost) { h.caps[helperPath] = capsV2(HelperCaps|1<<19, false) },
			"helper.caps", Fail, "more privilege than the helper needs", "setcap"},
		{"helper caps effective", func(h *fakeHost) { h.caps[helperPath] = capsV2(HelperCaps, true) },
			"helper.caps", Fail, "the effective bit makes them effective from exec on", "setcap"},
		{"helper caps namespaced", func(h *fakeHost) {
			b := append(capsV2(HelperCaps, true), 0xe8, 0x03, 0, 0)
			binary.LittleEndian.PutUint32(b, vfsCapRevision3|vfsCapFlagsEff)
			h.caps[helperPath] = b
		}, "helper.caps", Fail, "root is uid 1000", "setcap"},
		{"neighbour with caps", func(h *fakeHost) {
			h.stats["/usr/local/libexec/sandboxd/evil"] = FileInfo{Mode: 0o755}
			h.dirs["/usr/local/libexec/sandboxd"] = append(h.dirs["/usr/local/libexec/sandboxd"], "evil")
			h.caps["/usr/local/libexec/sandboxd/evil"] = capsV2(1<<21, true)
		}, "helper.dir", Fail, "evil carries cap_sys_admin=ep", "setcap -r /usr/local/libexec/sandboxd/evil"},
		{"neighbour setuid", func(h *fakeHost) {
			h.stats["/usr/local/libexec/sandboxd/sandboxd-exec"] = FileInfo{Mode: 0o755 | fs.ModeSetuid}
		}, "helper.dir", Fail, "sandboxd-exec is setuid/setgid", "chmod ug-s /usr/local/libexec/sandboxd/sandboxd-exec"},
		{"helper config not root-owned", func(h *fakeHost) {
			h.cfg, h.cfgErr = nil, errors.New(`helper config "/etc/sandboxd/nsinit.json": "/etc/sandboxd/nsinit.json" is owned by uid 999, not root`)
		}, "helper.config", Fail, "owned by uid 999", "make install"},
		{"profile not root-owned", func(h *fakeHost) { h.notRoot = map[string]error{profPath: errors.New("writable by others")} },
			"profile", Fail, "the helper refuses the payload profile", "make install"},
		{"profile not json", func(h *fakeHost) { h.files[profPath] = "{" },
			"profile", Fail, "is not a seccomp profile", "make install"},
		{"cache missing", func(h *fakeHost) { delete(h.stats, profPath+".bpf") },
			"profile.cache", Warn, "every launch compiles the profile", helperPath + " --compile-profile " + profPath},
		{"cache stale", func(h *fakeHost) { h.files[profPath] = `{"defaultAction":"SCMP_ACT_ALLOW"}` },
			"profile.cache", Warn, "made from another profile or architecture", "--compile-profile"},
		{"cache truncated", func(h *fakeHost) { h.files[profPath+".bpf"] = cacheFor(profJSON)[:len(cacheFor(profJSON))-3] },
			"profile.cache", Warn, "not a sock_filter array", "--compile-profile"},
		{"seccomp actions missing", func(h *fakeHost) { h.files["/proc/sys/kernel/seccomp/actions_avail"] = "allow errno\n" },
			"seccomp", Fail, "kill_thread, kill_process", "CONFIG_SECCOMP_FILTER"},
		{"no seccomp", func(h *fakeHost) { h.files["/proc/self/status"] = "NoNewPrivs:\t0\n" },
			"seccomp", Fail, "no seccomp", "CONFIG_SECCOMP"},
		{"doctor under nnp", func(h *fakeHost) { h.files["/proc/self/status"] = procStatus("1", "000001ffffffffff", "0") },
			"no_new_privs", Warn, "file capabilities do nothing under no_new_privs", "NoNewPrivileges=no"},
		{"supervisor down", func(h *fakeHost) { h.sup, h.supErr = nil, errors.New("connection refused") },
			"supervisor", Skip, "no supervisor answers at " + sockPath, "pass --socket PATH"},
		{"supervisor not ready", func(h *fakeHost) {
			h.sup.Health.OK = false
			h.sup.Health.Checks.Userns = "clone(CLONE_NEWUSER) refused"
		}, "supervisor", Fail, "userns: clone(CLONE_NEWUSER) refused", "fix in each message"},
		{"supervisor under nnp", func(h *fakeHost) { h.files["/proc/4242/status"] = procStatus("1", "00000000002010c0", "2") },
			"supervisor.privileges", Fail, "it runs with no_new_privs: file capabilities do nothing under no_new_privs", "allowPrivilegeEscalation: true"},
		{"supervisor bounding set", func(h *fakeHost) { h.files["/proc/4242/status"] = procStatus("0", "0000000000001000", "0") },
			"supervisor.privileges", Fail, "bounding set lacks cap_setgid,cap_setuid,cap_sys_admin", "CapabilityBoundingSet=CAP_SETGID CAP_SETUID CAP_NET_ADMIN CAP_SYS_ADMIN"},
		{"supervisor in another pid namespace", func(h *fakeHost) { delete(h.files, "/proc/4242/status") },
			"supervisor.privileges", Skip, "another pid namespace", ""},
		{"helper group shared with a caller", func(h *fakeHost) {
			h.files["/etc/group"] = strings.Replace(h.files["/etc/group"], "995:sandboxd", "995:sandboxd,alice", 1)
		}, "helper.group", Fail, "holds [alice sandboxd]: each of them may run the helper directly", "gpasswd -d NAME sandboxd-helper"},
		{"helper group is a shared primary group", func(h *fakeHost) {
			h.files["/etc/passwd"] += "bob:x:1001:995::/home/bob:/bin/sh\n"
		}, "helper.group", Fail, "holds [bob sandboxd]", "groupadd --system sandboxd-helper"},
		{"helper group holds another user", func(h *fakeHost) {
			h.files["/etc/group"] = strings.Replace(h.files["/etc/group"], "995:sandboxd", "995:sandboxd-ns", 1)
		}, "helper.group", Fail, "not the supervisor's user sandboxd", "usermod -aG sandboxd-helper sandboxd"},
		{"helper group root", func(h *fakeHost) { h.stats[helperPath] = FileInfo{Mode: 0o750, GID: 0} },
			"helper.group", Fail, "group root is no dedicated helper group", "chown root:sandboxd-helper"},
		{"socket group is the helper group", func(h *fakeHost) { h.stats[sockPath] = FileInfo{Mode: fs.ModeSocket | 0o660, UID: 999, GID: 995} },
			"socket.group", Fail, "everyone who may call the API may also run the helper directly", "--socket-group sandboxd-clients"},
		{"socket world-connectable", func(h *fakeHost) { h.stats[sockPath] = FileInfo{Mode: fs.ModeSocket | 0o666, UID: 999, GID: 996} },
			"socket.group", Fail, "any local user may connect", "0660"},
		{"no socket", func(h *fakeHost) { delete(h.stats, sockPath) },
			"socket.group", Skip, "no socket at " + sockPath, ""},
		{"supervisor with an extra group", func(h *fakeHost) {
			h.files["/proc/4242/status"] = strings.Replace(h.files["/proc/4242/status"], "Groups:\t995 996", "Groups:\t995 996 4 110", 1)
		}, "supervisor.groups", Warn, "it does not need 4, 110; payloads inherit", "setpriv --groups"},
		{"supervisor without the helper group", func(h *fakeHost) {
			h.files["/proc/4242/status"] = strings.Replace(h.files["/proc/4242/status"], "Groups:\t995 996", "Groups:\t996", 1)
		}, "supervisor.groups", Fail, "it is not in the helper's group sandboxd-helper", "usermod -aG sandboxd-helper sandboxd,"},
		{"supervisor groups unreadable", func(h *fakeHost) { delete(h.files, "/proc/4242/status") },
			"supervisor.groups", Skip, "cannot read the supervisor's groups", ""},
		{"state dir of the old layout", func(h *fakeHost) {
			h.stats["/var/lib/sandboxd"] = FileInfo{Mode: fs.ModeDir | 0o700, UID: 999, GID: 999}
		},
			"state.dir", Fail, "/var/lib/sandboxd: uid 999, mode 0700: the helper refuses", "chown root:root /var/lib/sandboxd && chmod 0755 /var/lib/sandboxd"},
		{"state dir writable by others", func(h *fakeHost) { h.stats["/var/lib/sandboxd"] = FileInfo{Mode: fs.ModeDir | fs.ModeSticky | 0o777} },
			"state.dir", Fail, "mode 1777", "make install"},
		{"workspace root a symlink", func(h *fakeHost) {
			h.stats["/var/lib/sandboxd/workspaces"] = FileInfo{Mode: fs.ModeSymlink | 0o777, UID: 999}
		},
			"state.dir", Fail, "is not a directory", "install -d -o sandboxd -m 0700 /var/lib/sandboxd/workspaces"},
		{"workspace root not the supervisor's", func(h *fakeHost) {
			h.stats["/var/lib/sandboxd/workspaces"] = FileInfo{Mode: fs.ModeDir | 0o700, UID: 0}
		},
			"state.dir", Fail, "owned by uid 0, not the supervisor's 999", "make install"},
		{"no delegation", func(h *fakeHost) { h.cgMode, h.cgReason = "none", "v2: not owned by uid 999" },
			"cgroups", Fail, "not owned by uid 999", "Delegate=yes"},
		{"no supervisor for cgroups", func(h *fakeHost) { h.sup, h.supErr = nil, errors.New("refused") },
			"cgroups", Warn, "delegation not checked", "Delegate=yes"},
		{"hybrid layout", func(h *fakeHost) {
			delete(h.files, "/sys/fs/cgroup/cgroup.controllers")
			h.files["/proc/self/mountinfo"] = "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n39 31 0:36 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
			h.cgMode, h.cgReason = "v1", "cgroup v1 subtrees /sys/fs/cgroup/memory/sandboxd"
		}, "cgroups", OK, "v1 controllers mounted: memory pids; cgroup2 also at /sys/fs/cgroup/unified (hybrid)", ""},
		{"node missing", func(h *fakeHost) { delete(h.stats, "/usr/bin/node") },
			"runtime.node", Fail, "/usr/bin/node is missing", "apt-get install nodejs"},
		{"python unreadable by payload", func(h *fakeHost) { h.stats["/usr/bin/python3"] = FileInfo{Mode: 0o750} },
			"runtime.python", Fail, "not executable by others", "apt-get install python3"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := healthyHost()
			c.break_(h)
			rep := Run(context.Background(), h, opts())
			r := find(t, rep, c.check)
			if r.Status != c.status {
				t.Fatalf("%s: status %s, want %s: %s", c.check, r.Status, c.status, r.Detail)
			}
			if !strings.Contains(r.Detail, c.detail) {
				t.Errorf("%s detail %q does not say %q", c.check, r.Detail, c.detail)
			}
			if !strings.Contains(r.Fix, c.fix) {
				t.Errorf("%s fix %q does not say %q", c.check, r.Fix, c.fix)
			}
			if (c.status == Fail) == rep.OK {
				t.Errorf("report OK = %v with a %s check", rep.OK, c.status)
			}
			if c.status == Fail && r.Fix == "" {
				t.Error("a failing check must say how to fix it")
			}
		})
	}
}

func TestParseFileCaps(t *testing.T) {
	fc, err := ParseFileCaps(capsV2(HelperCaps, true))
	if err != nil || fc.String() != "cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin=ep" {
		t.Fatalf("v2: %v %q", err, fc)
	}
	for _, bad := range [][]byte{nil, {1, 2}, make([]byte, 20), append(capsV2(1, true), 0)} {
		if _, err := ParseFileCaps(bad); err == nil {
			t.Errorf("ParseFileCaps(%x) accepted", bad)
		}
	}
	v1 := make([]byte, 12)
	binary.LittleEndian.PutUint32(v1, vfsCapRevision1|vfsCapFlagsEff)
	binary.LittleEndian.PutUint32(v1[4:], 1<<capNetAdmin)
	if fc, err := ParseFileCaps(v1); err != nil || fc.Permitted != 1<<capNetAdmin || !fc.Effective {
		t.Errorf("v1: %v %+v", err, fc)
	}
	if s := (FileCaps{Revision: 2, Permitted: 1 << 40, Inheritable: 1}).String(); s != "cap_checkpoint_restore=p cap_chown+i" {
		t.Errorf("String = %q", s)
	}
}

func TestReportOutput(t *testing.T) {
	h := healthyHost()
	delete(h.caps, helperPath)
	rep := Run(context.Background(), h, opts())
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	for _, want := range []string{"FAIL  helper.caps", "      fix: as root: setcap " + HelperSetcap + " " + helperPath, "1 failed; the host cannot run sandboxd"} {
		if !strings.Contains(out, want) {
			t.Errorf("text output lacks %q:\n%s", want, out)
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.OK || len(back.Checks) != len(rep.Checks) {
		t.Fatalf("JSON round trip: %v %+v", err, back)
	}
}

// TestRealHost runs every check against this machine. It asserts what is
// true of any host this project builds on (user namespaces and seccomp
// exist, the report is complete and consistent), not that sandboxd is
// installed.
func TestRealHost(t *testing.T) {
	dir := t.TempDir()
	o := Options{
		HelperPath:       filepath.Join(dir, "libexec", "sandboxd-nsinit"),
		HelperConfigPath: filepath.Join(dir, "nsinit.json"),
		SocketPath:       filepath.Join(dir, "absent.sock"),
		GOARCH:           runtime.GOARCH,
	}
	rep := Run(context.Background(), Real(), o)
	names := map[string]bool{}
	for _, r := range rep.Checks {
		if names[r.Name] {
			t.Errorf("check %q twice", r.Name)
		}
		names[r.Name] = true
		switch r.Status {
		case OK, Warn, Skip, Fail:
		default:
			t.Errorf("%s: status %q", r.Name, r.Status)
		}
		if r.Detail == "" {
			t.Errorf("%s: no detail", r.Name)
		}
		if r.Status == Fail && r.Fix == "" {
			t.Errorf("%s fails without a fix: %s", r.Name, r.Detail)
		}
	}
	for _, n := range []string{"userns", "bwrap", "helper", "helper.caps", "helper.dir", "helper.config", "profile", "profile.cache",
		"seccomp", "no_new_privs", "supervisor", "supervisor.privileges", "helper.group", "socket.group", "supervisor.groups", "state.dir", "cgroups", "runtime.python", "runtime.node"} {
		if !names[n] {
			t.Errorf("no check %q", n)
		}
	}
	if r := find(t, rep, "helper"); r.Status != Fail {
		t.Errorf("helper at a missing path: %s", r.Status)
	}
	if r := find(t, rep, "supervisor"); r.Status != Skip {
		t.Errorf("supervisor at an absent socket: %s %s", r.Status, r.Detail)
	}
	if rep.OK {
		t.Error("a host without the helper reported OK")
	}
	for _, n := range []string{"seccomp", "userns"} {
		if r := find(t, rep, n); r.Status == Fail {
			t.Errorf("%s fails on the build host: %s", n, r.Detail)
		}
	}
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	t.Logf("doctor on this host, helper at a temporary path:\n%s", buf.String())
}

// TestRealFileCaps reads a real security.capability attribute: a file in a
// temporary directory given the helper's capabilities with setcap must read
// back as exactly what the helper check wants.
func TestRealFileCaps(t *testing.T) {
	testutil.RequireRoot(t, "set file capabilities")
	setcap, err := exec.LookPath("setcap")
	if err != nil {
		testutil.SkipOrFail(t, fmt.Sprintf("needs setcap: %v", err))
	}
	f := filepath.Join(t.TempDir(), "helper")
	if err := os.WriteFile(f, []byte("#!/bin/true\n"), 0o750); err != nil {
		t.Fatal(err)
	}
	if raw, err := Real().FileCaps(f); err != nil || raw != nil {
		t.Fatalf("before setcap: %x %v", raw, err)
	}
	if out, err := exec.Command(setcap, HelperSetcap, f).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v: %s", err, out)
	}
	raw, err := Real().FileCaps(f)
	if err != nil {
		t.Fatal(err)
	}
	fc, err := ParseFileCaps(raw)
	if err != nil || fc.Permitted != HelperCaps || fc.Effective || fc.Inheritable != 0 {
		t.Fatalf("read back %+v (%v)", fc, err)
	}
	r := checkHelperCaps(Real(), Options{HelperPath: f})
	if r.Status != OK {
		t.Fatalf("helper.caps on a real setcap'd file: %s %s", r.Status, r.Detail)
	}
}

// A supervisor without cgroups fails the check unless the operator
// allowed it (--allow-no-cgroups, SANDBOXD_ALLOW_NO_CGROUPS): then a warning.
func TestCgroupsNoneAllowed(t *testing.T) {
	for _, allow := range []bool{false, true} {
		h := healthyHost()
		h.cgMode, h.cgReason = "none", "v2: not owned by uid 999"
		o := opts()
		o.AllowNoCgroups = allow
		r := find(t, Run(context.Background(), h, o), "cgroups")
		want := Fail
		if allow {
			want = Warn
		}
		if r.Status != want || !strings.Contains(r.Fix, "--allow-no-cgroups") {
			t.Errorf("allow %v: status %s (want %s), fix %q", allow, r.Status, want, r.Fix)
		}
	}
}
