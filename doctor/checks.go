package doctor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/moby/sys/mountinfo"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/internal/procstatus"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// sysctlFile is where doctor's sysctl fixes go.
const sysctlFile = "/etc/sysctl.d/90-sandboxd.conf"

// setcapFix is the command that gives the helper exactly its capabilities.
func setcapFix(helper string) string {
	return "as root: setcap " + HelperSetcap + " " + helper +
		"\n(or `make install`; copying or rebuilding the helper, and any chown of it, drops file capabilities)"
}

func sysctlFix(key, value string) string {
	return fmt.Sprintf("as root: echo '%s = %s' > %s && sysctl --system", key, value, sysctlFile)
}

// readSysctl returns a sysctl's value ("user.max_user_namespaces") and
// whether the kernel has it.
func readSysctl(h Host, key string) (string, bool) {
	b, err := h.ReadFile("/proc/sys/" + strings.ReplaceAll(key, ".", "/"))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

// checkUserns: the user namespace the helper creates must be allowed.
// Debian's kernel.unprivileged_userns_clone and Ubuntu's
// kernel.apparmor_restrict_unprivileged_userns restrict unprivileged
// processes only; the helper creates its namespace with CAP_SYS_ADMIN, so
// they matter only when the helper lacks it.
func checkUserns(h Host, helperHasCaps bool) Result {
	r := Result{Name: "userns"}
	v, ok := readSysctl(h, "user.max_user_namespaces")
	if !ok {
		r.Status, r.Detail = Fail, "the kernel has no user namespaces (/proc/sys/user/max_user_namespaces is missing)"
		r.Fix = "boot a kernel built with CONFIG_USER_NS=y (Debian's and Ubuntu's are)"
		return r
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("user.max_user_namespaces is %q, not a number", v)
		return r
	}
	if n == 0 {
		r.Status = Fail
		r.Detail = "user.max_user_namespaces = 0: the host refuses every user namespace, so every launch fails (503)"
		r.Fix = sysctlFix("user.max_user_namespaces", "15000")
		return r
	}
	r.Status = OK
	r.Detail = fmt.Sprintf("user.max_user_namespaces = %d", n)
	if n < 64 {
		r.Status = Warn
		r.Detail += "; each running exec holds one user namespace, so concurrent execs may be refused"
		r.Fix = sysctlFix("user.max_user_namespaces", "15000")
	}
	var restricted, fixes []string
	if v, ok := readSysctl(h, "kernel.unprivileged_userns_clone"); ok && v == "0" {
		restricted = append(restricted, "kernel.unprivileged_userns_clone = 0 (Debian)")
		fixes = append(fixes, sysctlFix("kernel.unprivileged_userns_clone", "1"))
	}
	if v, ok := readSysctl(h, "kernel.apparmor_restrict_unprivileged_userns"); ok && v == "1" {
		restricted = append(restricted, "kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu)")
		fixes = append(fixes, sysctlFix("kernel.apparmor_restrict_unprivileged_userns", "0"))
	}
	if len(restricted) == 0 {
		r.Detail += "; unprivileged user namespaces are not restricted"
		return r
	}
	r.Detail += "; restricted for unprivileged processes by " + strings.Join(restricted, " and ")
	if helperHasCaps {
		r.Detail += "; fine: the helper creates the namespace with its CAP_SYS_ADMIN"
		return r
	}
	r.Status = Fail
	r.Detail += ", and the helper lacks CAP_SYS_ADMIN to create it anyway (see helper.caps)"
	r.Fix = "give the helper its file capabilities (see helper.caps), or lift the restriction:\n" + strings.Join(fixes, "\n")
	return r
}

// bwrapMin is the oldest bubblewrap with --userns, --bind-fd,
// --ro-bind-data and --json-status-fd, which the helper's argv uses.
var bwrapMin = [3]int{0, 8, 0}

var versionRe = regexp.MustCompile(`(\d+)\.(\d+)(?:\.(\d+))?`)

func parseVersion(s string) ([3]int, bool) {
	m := versionRe.FindStringSubmatch(s)
	if m == nil {
		return [3]int{}, false
	}
	var v [3]int
	for i := 0; i < 3; i++ {
		if m[i+1] != "" {
			v[i], _ = strconv.Atoi(m[i+1])
		}
	}
	return v, true
}

func versionLess(a, b [3]int) bool {
	for i := 0; i < 3; i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func checkBwrap(ctx context.Context, h Host, hc *config.Config) Result {
	r := Result{Name: "bwrap"}
	path := ""
	if hc != nil {
		path = hc.Bwrap
	} else if p, err := h.LookPath("bwrap"); err == nil {
		path = p
	} else {
		path = "/usr/bin/bwrap"
	}
	st, err := h.Stat(path)
	if err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("bubblewrap is missing at %s: %v", path, err)
		r.Fix = "as root: apt-get install bubblewrap"
		return r
	}
	if !st.Mode.IsRegular() || st.Mode.Perm()&0o111 == 0 {
		r.Status, r.Detail = Fail, fmt.Sprintf("%s is not an executable file (mode %s)", path, st.Mode)
		r.Fix = "as root: apt-get install --reinstall bubblewrap"
		return r
	}
	if err := h.CheckRootOwned(path); err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("the helper refuses %s: %v", path, err)
		r.Fix = fmt.Sprintf("as root: chown root:root %s && chmod 0755 %s (and every directory above it: root-owned, not group/other-writable)", path, path)
		return r
	}
	out, err := h.Run(ctx, path, "--version")
	if err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("%s --version failed: %v", path, err)
		r.Fix = "as root: apt-get install --reinstall bubblewrap"
		return r
	}
	ver := strings.TrimSpace(string(out))
	v, ok := parseVersion(ver)
	if !ok {
		r.Status, r.Detail = Warn, fmt.Sprintf("%s: cannot read a version from %q", path, ver)
		return r
	}
	if versionLess(v, bwrapMin) {
		r.Status = Fail
		r.Detail = fmt.Sprintf("%s is %s; sandboxd needs bubblewrap 0.8.0 or newer (--userns, --bind-fd, --ro-bind-data, --json-status-fd)", path, ver)
		r.Fix = "as root: install bubblewrap 0.8.0 or newer (Debian 12: apt-get install bubblewrap)"
		return r
	}
	r.Status, r.Detail = OK, fmt.Sprintf("%s: %s", path, ver)
	if st.Mode&fs.ModeSetuid != 0 {
		r.Status = Warn
		r.Detail += "; it is setuid root, which sandboxd does not need (the helper makes the user namespace)"
		r.Fix = "as root, unless something else on this host needs a setuid bwrap: chmod u-s " + path
	}
	return r
}

func ownerGroup(h Host, st FileInfo) string {
	return fmt.Sprintf("uid %d, group %s", st.UID, h.GroupName(st.GID))
}

// checkHelperFile: root-owned, executable by its group only, writable by
// nobody else, never setuid or setgid.
func checkHelperFile(h Host, o Options) Result {
	r := Result{Name: "helper"}
	path := o.HelperPath
	st, err := h.Stat(path)
	if err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("the helper is missing at %s: %v", path, err)
		r.Fix = "as root: make install (or pass --helper PATH to check another installation)"
		return r
	}
	group := h.GroupName(st.GID)
	var problems []string
	if !st.Mode.IsRegular() {
		problems = append(problems, "not a regular file")
	}
	if st.UID != 0 {
		problems = append(problems, fmt.Sprintf("owned by uid %d, not root", st.UID))
	}
	if st.Mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		problems = append(problems, "has a setuid or setgid bit (the helper's only privilege must be its file capabilities)")
	}
	perm := st.Mode.Perm()
	if perm&0o022 != 0 {
		problems = append(problems, "writable by group or others")
	}
	if perm&0o007 != 0 {
		problems = append(problems, "others may read or run it (want group-executable only)")
	}
	if perm&0o010 == 0 {
		problems = append(problems, "its group cannot run it")
	}
	desc := fmt.Sprintf("%s: %s, mode %04o", path, ownerGroup(h, st), uint32(perm)|specialBits(st.Mode))
	if len(problems) > 0 {
		r.Status = Fail
		r.Detail = desc + ": " + strings.Join(problems, "; ")
		r.Fix = fmt.Sprintf("as root: chown root:%s %s && chmod 0750 %s && setcap %s %s\n(the group is the helper group, sandboxd-helper, holding only the service user; chown drops file capabilities, hence setcap last)", group, path, path, HelperSetcap, path)
		return r
	}
	r.Status, r.Detail = OK, desc+" (root-owned, group-executable only, no setuid/setgid)"
	return r
}

func specialBits(m fs.FileMode) uint32 {
	var b uint32
	if m&fs.ModeSetuid != 0 {
		b |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		b |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		b |= 0o1000
	}
	return b
}

// checkHelperCaps: exactly HelperCaps, permitted only (an effective bit
// would make all four effective from exec on, the window the prelude
// avoids), nothing inheritable, not namespaced to another root.
func checkHelperCaps(h Host, o Options) Result {
	r := Result{Name: "helper.caps"}
	path := o.HelperPath
	if _, err := h.Stat(path); err != nil {
		r.Status, r.Detail = Skip, "not checked: the helper is missing"
		return r
	}
	raw, err := h.FileCaps(path)
	if err != nil {
		r.Status, r.Detail = Fail, fmt.Sprintf("read the file capabilities of %s: %v", path, err)
		r.Fix = setcapFix(path)
		return r
	}
	want := FileCaps{Revision: 2, Permitted: HelperCaps}
	if raw == nil {
		r.Status = Fail
		r.Detail = fmt.Sprintf("%s has no file capabilities: it cannot make the network namespace or, where the host restricts them, the user namespace; every launch fails (503)", path)
		r.Fix = setcapFix(path)
		return r
	}
	fc, err := ParseFileCaps(raw)
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, path+": "+err.Error(), setcapFix(path)
		return r
	}
	switch {
	case fc.Revision == 3 && fc.RootID != 0:
		r.Status = Fail
		r.Detail = fmt.Sprintf("%s has %s: namespaced to the user namespace whose root is uid %d, so they do nothing here", path, fc, fc.RootID)
	case fc.Permitted != HelperCaps || fc.Effective || fc.Inheritable != 0:
		r.Status = Fail
		r.Detail = fmt.Sprintf("%s has %s; want exactly %s", path, fc, want)
		if fc.Permitted&^HelperCaps != 0 {
			r.Detail += " (more privilege than the helper needs)"
		}
		if fc.Effective {
			r.Detail += " (the effective bit makes them effective from exec on; the prelude raises each only around its call)"
		}
	default:
		r.Status, r.Detail = OK, fmt.Sprintf("%s has %s", path, fc)
		return r
	}
	r.Fix = setcapFix(path)
	return r
}

// checkHelperDir: nothing else next to the helper carries setuid, setgid
// or file capabilities.
func checkHelperDir(h Host, o Options) Result {
	r := Result{Name: "helper.dir"}
	dir := filepath.Dir(o.HelperPath)
	names, err := h.ReadDir(dir)
	if err != nil {
		r.Status, r.Detail = Skip, fmt.Sprintf("cannot list %s: %v", dir, err)
		return r
	}
	sort.Strings(names)
	var bad, fixes []string
	checked := 0
	for _, name := range names {
		p := filepath.Join(dir, name)
		if p == filepath.Clean(o.HelperPath) {
			continue
		}
		st, err := h.Lstat(p)
		if err != nil || !st.Mode.IsRegular() {
			continue
		}
		checked++
		if st.Mode&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			bad = append(bad, name+" is setuid/setgid")
			fixes = append(fixes, "chmod ug-s "+p)
		}
		if raw, err := h.FileCaps(p); err == nil && raw != nil {
			desc := "file capabilities"
			if fc, err := ParseFileCaps(raw); err == nil {
				desc = fc.String()
			}
			bad = append(bad, name+" carries "+desc)
			fixes = append(fixes, "setcap -r "+p)
		}
	}
	if len(bad) > 0 {
		r.Status = Fail
		r.Detail = fmt.Sprintf("in %s, besides the helper: %s; only the helper may carry privilege", dir, strings.Join(bad, "; "))
		r.Fix = "as root: " + strings.Join(fixes, " && ")
		return r
	}
	r.Status, r.Detail = OK, fmt.Sprintf("no other file in %s is setuid, setgid or has file capabilities (%d checked)", dir, checked)
	return r
}

// checkHelperConfig loads the helper's config as the helper would and
// checks what it names that the helper also requires root-owned.
func checkHelperConfig(h Host, o Options) (*config.Config, Result) {
	r := Result{Name: "helper.config"}
	path := o.HelperConfigPath
	fix := "as root: make install (it writes " + path + " root-owned, mode 0644, and the profiles it names)"
	hc, err := h.LoadHelperConfig(path)
	if err != nil {
		r.Status, r.Detail, r.Fix = Fail, err.Error(), fix
		return nil, r
	}
	var problems []string
	if err := h.CheckRootOwned(hc.Shim); err != nil {
		problems = append(problems, "shim: "+err.Error())
	}
	if len(problems) > 0 {
		r.Status, r.Detail, r.Fix = Fail, path+": "+strings.Join(problems, "; "), fix
		return hc, r
	}
	rts := make([]string, 0, len(hc.Runtimes))
	for name := range hc.Runtimes {
		rts = append(rts, name)
	}
	sort.Strings(rts)
	r.Status = OK
	r.Detail = fmt.Sprintf("%s: root-owned and valid; workspace_root %s, runtimes %s", path, hc.WorkspaceRoot, strings.Join(rts, ", "))
	return hc, r
}

const bpfMagic = "SANDBOXD-BPF 1"

// checkProfile: the payload profile is root-owned JSON, and its compiled
// cache (PROFILE.bpf, see nsinit/bpfcache.go) matches it.
func checkProfile(h Host, hc *config.Config, o Options) []Result {
	if hc == nil {
		return []Result{
			{Name: "profile", Status: Skip, Detail: "not checked: the helper config did not load"},
			{Name: "profile.cache", Status: Skip, Detail: "not checked: the helper config did not load"},
		}
	}
	p := hc.PayloadProfile
	pr := Result{Name: "profile"}
	fix := "as root: make install (it installs the profiles root-owned and compiles the cache)"
	if err := h.CheckRootOwned(p); err != nil {
		pr.Status, pr.Detail, pr.Fix = Fail, "the helper refuses the payload profile: "+err.Error(), fix
		return []Result{pr, {Name: "profile.cache", Status: Skip, Detail: "not checked: no usable profile"}}
	}
	raw, err := h.ReadFile(p)
	if err != nil {
		pr.Status, pr.Detail, pr.Fix = Fail, "read the payload profile: "+err.Error(), fix
		return []Result{pr, {Name: "profile.cache", Status: Skip, Detail: "not checked: no usable profile"}}
	}
	var probe struct {
		DefaultAction string `json:"defaultAction"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil || probe.DefaultAction == "" {
		why := "no defaultAction"
		if err != nil {
			why = err.Error()
		}
		pr.Status, pr.Detail, pr.Fix = Fail, fmt.Sprintf("%s is not a seccomp profile: %s", p, why), fix
		return []Result{pr, {Name: "profile.cache", Status: Skip, Detail: "not checked: no usable profile"}}
	}
	sum := sha256.Sum256(raw)
	sha := hex.EncodeToString(sum[:])
	pr.Status = OK
	pr.Detail = fmt.Sprintf("%s: root-owned JSON, sha256 %s (the helper compiles and audits it; `sandboxctl health` runs it for real)", p, sha[:16])

	cr := Result{Name: "profile.cache"}
	cache := p + ".bpf"
	compileFix := fmt.Sprintf("as root: %s --compile-profile %s (make install does this)", o.HelperPath, p)
	slow := "every launch compiles the profile itself (~200 ms each; never weaker)"
	if _, err := h.Lstat(cache); err != nil {
		cr.Status, cr.Detail, cr.Fix = Warn, fmt.Sprintf("no compiled cache %s: %s", cache, slow), compileFix
		return []Result{pr, cr}
	}
	if err := h.CheckRootOwned(cache); err != nil {
		cr.Status, cr.Detail, cr.Fix = Warn, fmt.Sprintf("the helper ignores %s (%v): %s", cache, err, slow), compileFix
		return []Result{pr, cr}
	}
	b, err := h.ReadFile(cache)
	if err != nil {
		cr.Status, cr.Detail, cr.Fix = Warn, fmt.Sprintf("read %s: %v: %s", cache, err, slow), compileFix
		return []Result{pr, cr}
	}
	want := fmt.Sprintf("%s %s %s\n", bpfMagic, sha, o.GOARCH)
	if !bytes.HasPrefix(b, []byte(want)) {
		line, _, _ := strings.Cut(string(b[:min(len(b), 120)]), "\n")
		cr.Status = Warn
		cr.Detail = fmt.Sprintf("%s starts %q; it was made from another profile or architecture (want sha256 %s, %s): %s", cache, line, sha[:16], o.GOARCH, slow)
		cr.Fix = compileFix
		return []Result{pr, cr}
	}
	if prog := b[len(want):]; len(prog) == 0 || len(prog)%8 != 0 {
		cr.Status, cr.Detail, cr.Fix = Warn, fmt.Sprintf("%s holds %d bytes of program, not a sock_filter array: %s", cache, len(prog), slow), compileFix
		return []Result{pr, cr}
	}
	cr.Status = OK
	cr.Detail = fmt.Sprintf("%s matches the profile (sha256 %s, %s, %d instructions)", cache, sha[:16], o.GOARCH, (len(b)-len(want))/8)
	return []Result{pr, cr}
}

// seccompActions the payload profile and libseccomp's bad-architecture
// handling need from the kernel.
var seccompActions = []string{"allow", "errno", "kill_thread", "kill_process"}

func checkSeccomp(h Host) Result {
	r := Result{Name: "seccomp"}
	status, err := h.ReadFile("/proc/self/status")
	if err != nil {
		r.Status, r.Detail = Skip, "cannot read /proc/self/status: "+err.Error()
		return r
	}
	mode, ok := procstatus.Field(status, "Seccomp")
	if !ok {
		r.Status, r.Detail = Fail, "the kernel has no seccomp (no Seccomp field in /proc/self/status)"
		r.Fix = "boot a kernel built with CONFIG_SECCOMP=y and CONFIG_SECCOMP_FILTER=y (Debian's and Ubuntu's are)"
		return r
	}
	avail, err := h.ReadFile("/proc/sys/kernel/seccomp/actions_avail")
	if err != nil {
		r.Status, r.Detail = Fail, "cannot read /proc/sys/kernel/seccomp/actions_avail (kernel older than 4.14?): "+err.Error()
		r.Fix = "boot a kernel 4.14 or newer with CONFIG_SECCOMP_FILTER=y"
		return r
	}
	have := map[string]bool{}
	for _, a := range strings.Fields(string(avail)) {
		have[a] = true
	}
	var missing []string
	for _, a := range seccompActions {
		if !have[a] {
			missing = append(missing, a)
		}
	}
	if len(missing) > 0 {
		r.Status, r.Detail = Fail, "the kernel lacks seccomp actions "+strings.Join(missing, ", ")
		r.Fix = "boot a kernel 4.14 or newer with CONFIG_SECCOMP_FILTER=y"
		return r
	}
	r.Status = OK
	r.Detail = "seccomp filters with actions " + strings.Join(strings.Fields(string(avail)), " ")
	if mode == "2" {
		r.Detail += "; doctor itself runs under a seccomp filter (a container profile?): it must allow what the helper and bwrap need, see profiles/kubernetes-worker.json"
	}
	return r
}

const nnpExplained = "file capabilities do nothing under no_new_privs, so the helper would get neither CAP_SYS_ADMIN nor CAP_NET_ADMIN and every launch would fail (503)"

const nnpFix = "start sandboxd without no_new_privs: systemd NoNewPrivileges=no and none of the options that imply it for a non-root service (RestrictAddressFamilies=, SystemCallFilter=, SystemCallArchitectures=, ProtectKernelTunables=, ProtectKernelModules=, ProtectKernelLogs=, ProtectClock=, ProtectHostname=, PrivateDevices=, LockPersonality=, MemoryDenyWriteExecute=, RestrictRealtime=, RestrictSUIDSGID=, RestrictNamespaces=; see deploy/systemd/sandboxd.service);\nDocker: security_opt no-new-privileges:false; Kubernetes: allowPrivilegeEscalation: true (see SECURITY.md)"

// checkCallerNNP: a supervisor started from this context inherits it.
func checkCallerNNP(h Host) Result {
	r := Result{Name: "no_new_privs"}
	status, err := h.ReadFile("/proc/self/status")
	if err != nil {
		r.Status, r.Detail = Skip, "cannot read /proc/self/status: "+err.Error()
		return r
	}
	if v, _ := procstatus.Field(status, "NoNewPrivs"); v == "1" {
		r.Status = Warn
		r.Detail = "this process runs with no_new_privs, and a supervisor started from here would too: " + nnpExplained
		r.Fix = nnpFix
		return r
	}
	r.Status, r.Detail = OK, "not set on this process (file capabilities work for programs started from here)"
	return r
}

// checkSupervisor asks the running supervisor for its health.
func checkSupervisor(ctx context.Context, h Host, o Options) (*Supervisor, Result) {
	r := Result{Name: "supervisor"}
	sup, err := h.Supervisor(ctx, o.SocketPath)
	if err != nil {
		r.Status = Skip
		r.Detail = fmt.Sprintf("no supervisor answers at %s (%v): its no_new_privs, capability bounding set and cgroups are not checked", o.SocketPath, err)
		r.Fix = "start it (make run, systemctl start sandboxd, or your container), or pass --socket PATH, and run doctor again"
		return nil, r
	}
	if sup.Health.OK {
		r.Status = OK
		r.Detail = fmt.Sprintf("sandboxd %s (pid %d) is ready: a real launch through the helper and bwrap works", sup.Health.Version, sup.PID)
		if c := sup.Health.Checks.Cgroups; c != "" {
			r.Detail += "; cgroups " + c
		}
		return sup, r
	}
	var bad []string
	checks := sup.Health.Checks.List()
	sort.Slice(checks, func(i, j int) bool { return checks[i].Name < checks[j].Name })
	for _, c := range checks {
		if c.Name == "cgroups" || c.Value == api.CheckOK || c.Value == "" {
			continue
		}
		bad = append(bad, c.Name+": "+c.Value)
	}
	r.Status = Fail
	r.Detail = fmt.Sprintf("sandboxd %s (pid %d) is NOT ready: %s", sup.Health.Version, sup.PID, strings.Join(bad, "; "))
	r.Fix = "follow the fix in each message above; the other checks here usually name the cause"
	return sup, r
}

// checkSupervisorPrivileges reads the running supervisor's status: no
// capability of its own (I1), no no_new_privs, and a bounding set that
// lets the helper's file capabilities through.
func checkSupervisorPrivileges(h Host, sup *Supervisor, o Options) Result {
	r := Result{Name: "supervisor.privileges"}
	if sup == nil {
		r.Status, r.Detail = Skip, "no running supervisor to check"
		return r
	}
	path := fmt.Sprintf("/proc/%d/status", sup.PID)
	status, err := h.ReadFile(path)
	if err != nil {
		r.Status, r.Detail = Skip, fmt.Sprintf("cannot read %s (%v): is the supervisor in another pid namespace? run doctor where it runs", path, err)
		return r
	}
	field := func(k string) string { v, _ := procstatus.Field(status, k); return v }
	mask := func(k string) uint64 { v, _ := parseCapMask(field(k)); return v }
	uid := strings.Fields(field("Uid"))
	var problems, fixes []string
	if field("NoNewPrivs") == "1" {
		problems = append(problems, "it runs with no_new_privs: "+nnpExplained)
		fixes = append(fixes, nnpFix)
	}
	if bnd := mask("CapBnd"); bnd&HelperCaps != HelperCaps {
		problems = append(problems, fmt.Sprintf("its capability bounding set lacks %s: the kernel masks the helper's file capabilities with it", capList(HelperCaps&^bnd)))
		fixes = append(fixes, "let the bounding set keep the helper's four: systemd CapabilityBoundingSet=CAP_SETGID CAP_SETUID CAP_NET_ADMIN CAP_SYS_ADMIN; Docker cap_add: [SETGID, SETUID, NET_ADMIN, SYS_ADMIN]; Kubernetes capabilities.add: [SETGID, SETUID, NET_ADMIN, SYS_ADMIN]")
	}
	if mask("CapEff") != 0 || mask("CapPrm") != 0 || mask("CapAmb") != 0 {
		problems = append(problems, fmt.Sprintf("it holds capabilities (CapEff %s, CapPrm %s, CapAmb %s); the supervisor must hold none", field("CapEff"), field("CapPrm"), field("CapAmb")))
		fixes = append(fixes, "start it with none: systemd AmbientCapabilities= empty; setpriv --inh-caps=-all --ambient-caps=-all")
	}
	if len(uid) > 0 && uid[0] == "0" {
		problems = append(problems, "it runs as root")
		fixes = append(fixes, "run it as its service user")
	}
	desc := fmt.Sprintf("pid %d, uid %s: NoNewPrivs %s, CapEff %s, bounding set %s, Seccomp %s",
		sup.PID, strings.Join(uid[:min(len(uid), 1)], ""), field("NoNewPrivs"), field("CapEff"), capList(mask("CapBnd")&HelperCaps), field("Seccomp"))
	if len(problems) > 0 {
		r.Status = Fail
		r.Detail = desc + ": " + strings.Join(problems, "; ")
		r.Fix = strings.Join(fixes, "\n")
		return r
	}
	r.Status, r.Detail = OK, desc
	return r
}

// checkCgroups describes the layout and what the supervisor can use. A
// supervisor without a delegated subtree enforces no memory, pids or CPU
// limit: a failure, unless the operator allowed it (--allow-no-cgroups),
// then a warning. Without a running supervisor delegation is not checked.
func checkCgroups(h Host, sup *Supervisor, allowNone bool) Result {
	r := Result{Name: "cgroups"}
	var layout []string
	if b, err := h.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		c := strings.Fields(string(b))
		layout = append(layout, fmt.Sprintf("v2 unified at /sys/fs/cgroup with controllers [%s]", strings.Join(c, " ")))
	}
	if mounts, err := h.ReadFile("/proc/self/mountinfo"); err == nil {
		var v1 []string
		hybrid := ""
		infos, _ := mountinfo.GetMountsFromReader(bytes.NewReader(mounts), mountinfo.FSTypeFilter("cgroup", "cgroup2"))
		for _, m := range infos {
			switch m.FSType {
			case "cgroup":
				for _, opt := range strings.Split(m.VFSOptions, ",") {
					switch opt {
					case "memory", "pids", "cpu", "cpuacct", "cpuset", "blkio", "devices", "freezer", "io":
						v1 = append(v1, opt)
					}
				}
			case "cgroup2":
				if m.Mountpoint != "/sys/fs/cgroup" {
					hybrid = m.Mountpoint
				}
			}
		}
		if len(v1) > 0 {
			sort.Strings(v1)
			layout = append(layout, "v1 controllers mounted: "+strings.Join(v1, " "))
		}
		if hybrid != "" {
			layout = append(layout, "cgroup2 also at "+hybrid+" (hybrid)")
		}
	}
	if len(layout) == 0 {
		layout = append(layout, "no cgroup hierarchy found")
	}
	desc := strings.Join(layout, "; ")
	fix := "delegate a subtree to the service user: systemd Delegate=yes (deploy/systemd/sandboxd.service), make run (a transient scope with Delegate=yes, or without systemd a cgroup it makes and chowns), a container with its own cgroup namespace, or on a v1/hybrid host, as root: sandboxctl admin delegate-cgroups --user sandboxd; or, knowingly, run without limits: --allow-no-cgroups"
	if sup == nil {
		r.Status, r.Detail = Warn, desc+"; delegation not checked (no running supervisor): without it memory, pids and CPU limits are not enforced"
		r.Fix = fix
		return r
	}
	status, err := h.ReadFile(fmt.Sprintf("/proc/%d/status", sup.PID))
	uid := -1
	if err == nil {
		if f := strings.Fields(func() string { v, _ := procstatus.Field(status, "Uid"); return v }()); len(f) > 0 {
			uid, _ = strconv.Atoi(f[0])
		}
	}
	mode, reason := h.Cgroups(fmt.Sprintf("/proc/%d", sup.PID), uid, "sandboxd")
	if mode == "v1" || mode == "v2" {
		r.Status, r.Detail = OK, fmt.Sprintf("%s; the supervisor (uid %d) uses %s", desc, uid, reason)
		return r
	}
	r.Status = Fail
	r.Detail = fmt.Sprintf("%s; the supervisor (uid %d) has no delegated subtree, so memory, pids and CPU limits are not enforced: %s", desc, uid, reason)
	if allowNone {
		r.Status = Warn
		r.Detail += " (allowed: --allow-no-cgroups)"
	}
	r.Fix = fix
	return r
}

// checkRuntimes: the language runtimes the helper's config names exist
// and start.
func checkRuntimes(ctx context.Context, h Host, hc *config.Config) []Result {
	want := []struct{ name, runtime, fallback, pkg string }{
		{"runtime.python", "python", "/usr/bin/python3", "python3"},
		{"runtime.node", "javascript", "/usr/bin/node", "nodejs"},
	}
	var out []Result
	for _, w := range want {
		r := Result{Name: w.name}
		path := w.fallback
		if hc != nil {
			if rt, ok := hc.Runtimes[w.runtime]; ok && len(rt.Argv) > 0 {
				path = rt.Argv[0]
			}
		}
		fix := "as root: apt-get install " + w.pkg
		st, err := h.Stat(path)
		if err != nil {
			r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s is missing (%v): %s code cannot run", path, err, w.runtime), fix
			out = append(out, r)
			continue
		}
		if !st.Mode.IsRegular() || st.Mode.Perm()&0o001 == 0 {
			r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s is not executable by others (mode %s): the payload's uid cannot run it", path, st.Mode), fix
			out = append(out, r)
			continue
		}
		v, err := h.Run(ctx, path, "--version")
		if err != nil {
			r.Status, r.Detail, r.Fix = Fail, fmt.Sprintf("%s --version failed: %v", path, err), fix
			out = append(out, r)
			continue
		}
		r.Status, r.Detail = OK, fmt.Sprintf("%s: %s", path, strings.TrimSpace(string(v)))
		out = append(out, r)
	}
	return out
}
