// Package nsinit is sandboxd's privileged helper: everything that happens
// between the supervisor handing over a launch spec and bubblewrap starting.
// Its host privilege lives in the C prelude (package prelude), which has made
// the namespaces and dropped every capability before any code here runs.
//
// It owns: reading and validating the spec against its own root-owned config,
// verifying the network namespace, compiling the payload's seccomp profile,
// rlimits and no_new_privs, and building bubblewrap's argv and environment.
//
// It must never take a trust-defining setting (bwrap path, binds, profile,
// workspace root) from the supervisor, never pass the supervisor's or its
// own environment on, and never exec anything but the configured bwrap.
package nsinit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// Version is the helper's version, set at build time and echoed in every
// exec result's policy attestation.
var Version = "0.1.0-dev"

// fixCapabilities is the operator's fix when the helper lacks its privilege.
func fixCapabilities(helper string) string {
	return fmt.Sprintf("give the helper its file capabilities (setcap cap_sys_admin,cap_net_admin+ep %s) and start sandboxd without no_new_privs and with CAP_SYS_ADMIN and CAP_NET_ADMIN in its bounding set; run `sandboxctl doctor` to see which is missing", helper)
}

// launch carries the state of one launch through the steps of Main.
type launch struct {
	rep        *reporter
	pre        PreludeOutcome
	cfg        *config.Config
	spec       *spec.LaunchSpec
	rt         config.Runtime
	probe      bool
	fds        BwrapFDs
	profileSHA string
}

// Main runs the helper's launch order and returns its exit status; on
// success it does not return (bwrap replaces the process). The order is the
// one in DESIGN.md, one report per step:
//
//	enter    config, spec, the prelude's namespaces, the workspace fd
//	network  only "lo", up, in the prelude's network namespace
//	seccomp  the payload profile compiled to cBPF for bwrap's --seccomp
//	drop     no capability in any thread, rlimits, no_new_privs
//	exec     bwrap with the argv and environment built here
func Main(pre PreludeOutcome) int {
	// no_new_privs and the final execve must happen on the same thread.
	runtime.LockOSThread()
	// Nothing of the supervisor's environment may reach bwrap or the payload.
	os.Clearenv()

	for _, fd := range []int{spec.FDSpec, spec.FDReport, spec.FDStatus, spec.FDRelease} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			fmt.Fprintf(os.Stderr, "sandboxd-nsinit: fd %d not open: it is meant to be started by sandboxd with the spec on fd 3, reports on fd 4, bwrap status on fd 5, the release pipe on fd 6\n", fd)
			return spec.ExitUsage
		}
	}
	unix.CloseOnExec(spec.FDReport)
	unix.CloseOnExec(spec.FDRelease)
	l := &launch{rep: &reporter{f: os.NewFile(spec.FDReport, "report"), start: pre.StartedNS}, pre: pre}
	for _, step := range []func() int{l.enter, l.network, l.seccomp, l.drop, l.exec} {
		if status := step(); status != 0 {
			return status
		}
	}
	return spec.ExitExec // unreachable: exec either replaced us or failed
}

func (l *launch) enter() int {
	cfg, err := config.Load(config.DefaultPath)
	if err != nil {
		return l.rep.fail(&facts.Enter{}, spec.ExitConfig, err, "reinstall the helper config (make install) so it is root-owned and valid")
	}
	l.cfg = cfg
	specFile := os.NewFile(spec.FDSpec, "spec")
	s, err := spec.Decode(specFile)
	specFile.Close()
	if err != nil {
		return l.rep.fail(&facts.Enter{}, spec.ExitSpec, err, "")
	}
	l.spec = s
	if err := l.checkSpec(); err != nil {
		return l.rep.fail(&facts.Enter{}, spec.ExitSpec, err, "")
	}

	ef := &facts.Enter{
		ExecID: s.ExecID, CallerUID: s.CallerUID, Runtime: s.Runtime, Probe: l.probe,
		HelperVersion: Version, Config: config.DefaultPath, ConfigSHA256: fileSHA256(config.DefaultPath),
		EUID: l.pre.EUID, EGID: l.pre.EGID,
		UIDMap: strings.TrimSpace(l.pre.UIDMap), GIDMap: strings.TrimSpace(l.pre.GIDMap),
		Setgroups: "deny", HolderPID: l.pre.HolderPID,
		PreludeUS: (l.pre.FinishedNS - l.pre.StartedNS) / 1000,
	}
	if l.pre.FailedStep != "" {
		status, fix := spec.ExitEnter, fixCapabilities(selfPath())
		var failed facts.Helper = ef
		switch {
		case l.pre.FailedStep == facts.StepNetwork:
			status, failed = spec.ExitNetwork, &facts.Network{Enter: ef}
		case l.pre.FailedStep == facts.StepDrop:
			status, failed = spec.ExitDrop, &facts.Drop{Enter: ef}
		case l.pre.Errno == unix.ENOSPC:
			fix = "raise user.max_user_namespaces: echo 'user.max_user_namespaces = 15000' > /etc/sysctl.d/90-sandboxd.conf && sysctl --system (`sandboxctl doctor` checks it)"
		case strings.Contains(l.pre.Message, "uid or gid 0"):
			fix = "start sandboxd as its service user, never as root"
		}
		return l.rep.fail(failed, status, l.pre.Err(), fix)
	}
	ef.UsernsInode = nsInode(fmt.Sprintf("/proc/self/fd/%d", l.pre.UsernsFD))
	ef.OwnUsernsInode = nsInode("/proc/self/ns/user")
	l.fds.Userns = l.pre.UsernsFD

	ws, err := openWorkspace(cfg.WorkspaceRoot, s.Workspace, l.pre.EUID)
	if err != nil {
		return l.rep.fail(ef, spec.ExitSpec, err, "")
	}
	l.fds.Workspace = ws
	ef.Workspace = s.Workspace
	l.rep.ok(ef)
	return 0
}

// checkSpec validates the spec against the helper's own config.
func (l *launch) checkSpec() error {
	s := l.spec
	if s.Runtime == "probe" {
		l.probe, l.rt = true, ProbeRuntime
	} else {
		rt, ok := l.cfg.Runtimes[s.Runtime]
		if !ok {
			return fmt.Errorf("runtime %q is not configured", s.Runtime)
		}
		l.rt = rt
	}
	if s.TmpSizeBytes == 0 {
		s.TmpSizeBytes = l.cfg.TmpSizeMaxBytes
	}
	if s.TmpSizeBytes > l.cfg.TmpSizeMaxBytes {
		return fmt.Errorf("tmp_size_bytes %d above the helper's cap %d", s.TmpSizeBytes, l.cfg.TmpSizeMaxBytes)
	}
	for _, rl := range s.Process.Rlimits {
		if rl.Type == "RLIMIT_CORE" {
			continue // always 0, whatever was asked
		}
		max, ok := l.cfg.RlimitMax[rl.Type]
		if !ok || rl.Hard > max {
			return fmt.Errorf("%s hard %d above the helper's cap %d", rl.Type, rl.Hard, max)
		}
	}
	return nil
}

// openWorkspace opens root/name as an O_PATH directory fd without following
// any symlink and without leaving root, and checks that the supervisor's uid
// owns it: the supervisor may only hand its own directories to a sandbox.
func openWorkspace(root, name string, owner int) (int, error) {
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open workspace root %q: %w", root, err)
	}
	defer unix.Close(rootFD)
	// Inheritable on purpose (no O_CLOEXEC): bwrap binds it with --bind-fd.
	fd, err := unix.Openat2(rootFD, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, fmt.Errorf("open workspace %q below %q: %w", name, root, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("stat workspace %q: %w", name, err)
	}
	if int(st.Uid) != owner {
		unix.Close(fd)
		return -1, fmt.Errorf("workspace %q is owned by uid %d, not the supervisor's uid %d", name, st.Uid, owner)
	}
	return fd, nil
}

func (l *launch) network() int {
	nf := &facts.Network{Mode: l.spec.Network, NetnsInode: nsInode("/proc/self/ns/net")}
	links, err := netlink.LinkList()
	if err != nil {
		return l.rep.fail(nf, spec.ExitNetwork, fmt.Errorf("list links: %w", err), "")
	}
	var names []string
	for _, link := range links {
		names = append(names, link.Attrs().Name)
	}
	nf.Links = names
	if len(links) != 1 || links[0].Attrs().Name != "lo" {
		return l.rep.fail(nf, spec.ExitNetwork, fmt.Errorf("network namespace has links %v, want only lo", names), "")
	}
	if links[0].Attrs().Flags&net.FlagUp == 0 {
		return l.rep.fail(nf, spec.ExitNetwork, errors.New("loopback is down"), "")
	}
	addrs, err := netlink.AddrList(links[0], netlink.FAMILY_ALL)
	if err != nil {
		return l.rep.fail(nf, spec.ExitNetwork, fmt.Errorf("list addresses: %w", err), "")
	}
	var as []string
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return l.rep.fail(nf, spec.ExitNetwork, fmt.Errorf("non-loopback address %s on lo", a.IPNet), "")
		}
		as = append(as, a.IPNet.String())
	}
	nf.Addrs = as
	l.rep.ok(nf)
	return 0
}

func (l *launch) seccomp() int {
	path := l.cfg.PayloadProfile
	sf := &facts.Seccomp{Profile: path}
	fix := "reinstall the payload profile (make install): it must be root-owned, valid Docker/OCI seccomp JSON"
	if err := config.CheckRootOwned(path); err != nil {
		return l.rep.fail(sf, spec.ExitSeccomp, fmt.Errorf("payload profile: %w", err), fix)
	}
	bpf, sha, source, p, err := payloadFilter(path)
	sf.ProfileSHA256, sf.BPFSource = sha, source
	if err != nil {
		return l.rep.fail(sf, spec.ExitSeccomp, err, fix)
	}
	if p != nil {
		sf.SkippedSyscalls = p.Skipped
	}
	fd, err := sealedMemfd("sandboxd-seccomp", bpf)
	if err != nil {
		return l.rep.fail(sf, spec.ExitSeccomp, err, "")
	}
	l.fds.Seccomp = fd
	l.profileSHA = sha
	sf.BPFInstructions = len(bpf) / 8
	sf.BPFSHA256 = sha256Hex(bpf)
	sf.AppliedBy = "bwrap --seccomp, immediately before it execs the payload"
	l.rep.ok(sf)
	return 0
}

func (l *launch) drop() int {
	df := &facts.Drop{}
	// RLIMIT_CORE first and always: a core of a payload is a copy of its memory.
	limits := map[string]uint64{"RLIMIT_CORE": 0}
	for _, rl := range l.spec.Process.Rlimits {
		if rl.Type != "RLIMIT_CORE" {
			limits[rl.Type] = rl.Hard
			if err := setRlimit(rl.Type, rl.Soft, rl.Hard); err != nil {
				return l.rep.fail(df, spec.ExitDrop, err, "")
			}
		}
	}
	if err := setRlimit("RLIMIT_CORE", 0, 0); err != nil {
		return l.rep.fail(df, spec.ExitDrop, err, "")
	}
	df.Rlimits = limits

	threads, err := ThreadCaps()
	if err != nil {
		return l.rep.fail(df, spec.ExitDrop, err, "")
	}
	for tid, c := range threads {
		if c.Held() {
			return l.rep.fail(df, spec.ExitDrop, fmt.Errorf("thread %s still holds capabilities %+v", tid, c), "")
		}
	}
	// The leader's full view, as an auditor reads it in /proc.
	leader, err := ReadCapSets("/proc/self/status")
	if err != nil {
		return l.rep.fail(df, spec.ExitDrop, err, "")
	}
	if leader.Held() {
		return l.rep.fail(df, spec.ExitDrop, fmt.Errorf("the helper still holds capabilities %+v", leader), "")
	}
	df.ThreadsChecked = len(threads)
	df.CapInh, df.CapPrm, df.CapEff, df.CapAmb, df.CapBnd = leader.Inh, leader.Prm, leader.Eff, leader.Amb, leader.Bnd

	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return l.rep.fail(df, spec.ExitDrop, fmt.Errorf("set no_new_privs: %w", err), "")
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil || nnp != 1 {
		return l.rep.fail(df, spec.ExitDrop, fmt.Errorf("no_new_privs reads back %d: %v", nnp, err), "")
	}
	df.NoNewPrivs = nnp
	l.rep.ok(df)
	return 0
}

var rlimitResources = map[string]int{
	"RLIMIT_CORE": unix.RLIMIT_CORE, "RLIMIT_NOFILE": unix.RLIMIT_NOFILE, "RLIMIT_FSIZE": unix.RLIMIT_FSIZE,
	"RLIMIT_STACK": unix.RLIMIT_STACK, "RLIMIT_AS": unix.RLIMIT_AS, "RLIMIT_MEMLOCK": unix.RLIMIT_MEMLOCK,
}

func setRlimit(name string, soft, hard uint64) error {
	res, ok := rlimitResources[name]
	if !ok {
		return fmt.Errorf("unknown rlimit %s", name)
	}
	if err := unix.Setrlimit(res, &unix.Rlimit{Cur: soft, Max: hard}); err != nil {
		return fmt.Errorf("setrlimit %s %d/%d: %w", name, soft, hard, err)
	}
	return nil
}

func (l *launch) exec() int {
	cfg := l.cfg
	xf := &facts.Exec{}
	for what, p := range map[string]string{"bwrap": cfg.Bwrap, "shim": cfg.Shim} {
		if err := config.CheckRootOwned(p); err != nil {
			fix := "install bubblewrap: apt-get install bubblewrap"
			if what == "shim" {
				fix = "reinstall sandboxd (make install)"
			}
			return l.rep.fail(xf, spec.ExitExec, fmt.Errorf("%s: %w", what, err), fix)
		}
	}
	env := PayloadEnv(cfg.BaseEnv, l.spec.Process.Env)
	envFD, err := sealedMemfd("sandboxd-env", []byte(strings.Join(env, "\x00")+"\x00"))
	if err != nil {
		return l.rep.fail(xf, spec.ExitExec, err, "")
	}
	l.fds.Env, l.fds.Code, l.fds.Status = envFD, -1, spec.FDStatus
	if !l.probe {
		if l.fds.Code, err = sealedMemfd("sandboxd-code", l.spec.Code); err != nil {
			return l.rep.fail(xf, spec.ExitExec, err, "")
		}
	}
	argv := BwrapArgs(cfg, l.rt, l.fds, l.spec.TmpSizeBytes)
	xf.Argv = argv
	xf.BwrapEnv = cfg.BaseEnv
	xf.PayloadEnvNames = EnvNames(env)
	xf.MountsSHA256 = MountsDigest(cfg, l.spec.TmpSizeBytes)
	xf.ProfileSHA256 = l.profileSHA
	xf.HelperVersion = Version
	xf.CodeSHA256 = sha256Hex(l.spec.Code)
	// Wait until the supervisor has placed this process in the exec's
	// cgroup: everything bwrap starts must start inside it.
	var b [1]byte
	for {
		n, err := unix.Read(spec.FDRelease, b[:])
		if err == unix.EINTR {
			continue
		}
		if n != 1 || err != nil {
			return l.rep.fail(xf, spec.ExitUsage, fmt.Errorf("the supervisor did not release the launch (read fd %d: %d bytes, %v)", spec.FDRelease, n, err), "")
		}
		break
	}
	unix.Close(spec.FDRelease)
	l.rep.ok(xf)
	// bwrap gets the fixed base environment only: its reaper (pid 1 in the
	// sandbox) keeps it in /proc/1/environ whatever --clearenv does.
	err = unix.Exec(cfg.Bwrap, argv, cfg.BaseEnv)
	return l.rep.fail(xf, spec.ExitExec, fmt.Errorf("execve %s: %w", cfg.Bwrap, err), "install bubblewrap: apt-get install bubblewrap")
}

// MountsDigest is the sha256 of everything that decides what the payload
// can see, for the policy attestation of an exec result.
func MountsDigest(cfg *config.Config, tmpSize int64) string {
	b, _ := json.Marshal(struct {
		ROBinds  []string
		Symlinks []config.Symlink
		Devices  []string
		Shim     string
		TmpSize  int64
		Writable []string
	}{cfg.ROBinds, cfg.Symlinks, cfg.Devices, cfg.Shim, tmpSize, []string{"/workspace", "/tmp", "/dev/shm"}})
	return sha256Hex(b)
}

// sealedMemfd returns an inheritable memfd holding data, sealed against any
// change and positioned at 0 for bwrap to read.
func sealedMemfd(name string, data []byte) (int, error) {
	fd, err := unix.MemfdCreate(name, unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, fmt.Errorf("memfd_create %s: %w", name, err)
	}
	for rest := data; len(rest) > 0; {
		n, err := unix.Write(fd, rest)
		if err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("write %s: %w", name, err)
		}
		rest = rest[n:]
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("seal %s: %w", name, err)
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("rewind %s: %w", name, err)
	}
	return fd, nil
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func fileSHA256(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return sha256Hex(b)
}

func selfPath() string {
	p, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return "sandboxd-nsinit"
	}
	return p
}
