// Package nsinit is sandboxd's privileged helper: everything that happens
// between the supervisor handing over a launch spec and bubblewrap starting.
// Its host privilege lives in the C prelude (package prelude), which has made
// the namespaces and dropped every capability before any code here runs.
//
// It owns: reading and validating the spec against its own root-owned config,
// verifying the network namespace, compiling the payload's seccomp profile,
// rlimits and no_new_privs, building bubblewrap's argv and environment,
// and staying bwrap's parent (its relay) so that kills and the supervisor's
// death reach a bwrap that runs as the namespace owner.
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
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// Version is the helper's version, set at build time and echoed in every
// exec result's policy attestation.
var Version = "0.1.0-dev"

// FileCaps is the helper's exact file capability set: permitted only, so
// that nothing is effective until the prelude raises one capability around
// the one call that needs it (see SECURITY.md for the syscall behind each).
const FileCaps = "cap_setgid,cap_setuid,cap_net_admin,cap_sys_admin+p"

// fixCapabilities is the operator's fix when the helper lacks its privilege.
func fixCapabilities(helper string) string {
	return fmt.Sprintf("give the helper its file capabilities (setcap %s %s) and start sandboxd without no_new_privs and with CAP_SETUID, CAP_SETGID, CAP_SYS_ADMIN and CAP_NET_ADMIN in its bounding set; run `sandboxctl doctor` to see which is missing", FileCaps, helper)
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
	net        netCheck // made before the spec is read (checkNetwork)
	early      *early   // the rest of the request-independent work (early.go)
	// parentGone receives SIGTERM: the supervisor's stop, or its death once
	// the relay re-armed the parent-death signal (catchSIGTERM).
	parentGone chan os.Signal
	bwrapPID   atomic.Int64 // once bwrap is forked
	forking    sync.Mutex   // held across bwrap's fork until bwrapPID is set (forkBwrap)
	subreaper  bool         // bwrap's orphans come to this process (becomeSubreaper)
	keeperDone sync.Once    // endKeeper
}

// Main runs the helper's launch order and returns its exit status; on
// success, bwrap's (the helper waits for it as its relay). The order is the
// one in docs/DESIGN.md, one report per step:
//
//	enter    config, spec, the prelude's namespaces, the workspace fd
//	network  only "lo", up, in the prelude's network namespace (checked
//	         before the spec is read: it depends on no request)
//	seccomp  the payload profile compiled to cBPF for bwrap's --seccomp
//	drop     no capability in any thread, rlimits, no_new_privs
//	exec     bwrap, forked as the namespace owner with the argv and
//	         environment built here; the helper relays until it exits
func Main(pre PreludeOutcome) int {
	// no_new_privs, the final credential switch and execve must happen on
	// the same thread (PDEATHSIG and no_new_privs are per thread).
	runtime.LockOSThread()
	// Nothing of the supervisor's environment may reach bwrap or the payload.
	os.Clearenv()
	rep := &reporter{f: os.NewFile(spec.FDReport, "report"), start: pre.StartedNS}
	// The prelude's outcome before anything else: no config, no spec, no
	// supervisor-controlled byte is parsed after a failed prelude.
	if pre.FailedStep != "" {
		status := preludeFailed(rep, pre)
		(&launch{pre: pre}).endKeeper()
		return status
	}
	for _, fd := range []int{spec.FDSpec, spec.FDReport, spec.FDStatus, spec.FDRelease} {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil {
			fmt.Fprintf(os.Stderr, "sandboxd-nsinit: fd %d not open: it is meant to be started by sandboxd with the spec on fd 3, reports on fd 4, bwrap status on fd 5, the release pipe on fd 6\n", fd)
			return spec.ExitUsage
		}
	}
	unix.CloseOnExec(spec.FDReport)
	unix.CloseOnExec(spec.FDRelease)
	// Before enter blocks on the spec: a pre-started helper does this
	// while it waits (early.go says why none of it is trusted alone).
	warmUp()
	l := &launch{rep: rep, pre: pre, net: checkNetwork(), early: prepareEarly(config.DefaultPath)}
	l.catchSIGTERM()
	status := runSteps([]func() int{l.enter, l.network, l.seccomp, l.drop, l.exec})
	l.endKeeper()
	return status
}

// catchSIGTERM handles SIGTERM for the whole launch. Before bwrap exists
// the helper ends its keeper (and reaps it: a keeper left to the
// supervisor would stay its zombie) and dies by the signal, as it did by
// default; once bwrap runs, it kills the sandbox (killSandbox) and the
// relay exits as bwrap did.
func (l *launch) catchSIGTERM() {
	l.parentGone = make(chan os.Signal, 1)
	signal.Notify(l.parentGone, syscall.SIGTERM)
	go func() {
		<-l.parentGone
		// Not while bwrap's fork is under way (exec holds forking from
		// just before it until bwrapPID is set): a bwrap forked but not
		// yet known here was once left running while this process ended
		// its keeper and died -- a bwrap that had joined the namespace in
		// between had lost its parent-death signal (setns clears it), and
		// the keeper had scanned before it joined. Held, exec never forks.
		l.forking.Lock()
		if pid := l.bwrapPID.Load(); pid > 0 {
			l.forking.Unlock()
			killSandbox(int(pid))
			return
		}
		l.endKeeper()
		dieBy(syscall.SIGTERM)
	}()
}

// runSteps runs the launch's steps in order and returns the helper's
// status: the first failing set-up step's, or else the last step's (exec:
// bwrap's status as is, 0 included -- 0 there is the payload's success,
// not "step passed").
func runSteps(steps []func() int) int {
	last := len(steps) - 1
	for _, step := range steps[:last] {
		if status := step(); status != 0 {
			return status
		}
	}
	return steps[last]()
}

// preludeFacts are the prelude's facts, in every enter report.
func preludeFacts(pre PreludeOutcome) *facts.Enter {
	return &facts.Enter{
		RUID: pre.RUID, RGID: pre.RGID, EUID: pre.EUID, EGID: pre.EGID,
		OwnerUID: pre.OwnerUID, OwnerGID: pre.OwnerGID, OwnerFile: pre.OwnerPath,
		UIDMap: strings.TrimSpace(pre.UIDMap), GIDMap: strings.TrimSpace(pre.GIDMap),
		Setgroups: "deny", HolderPID: pre.HolderPID,
		PreludeUS: (pre.FinishedNS - pre.StartedNS) / 1000, CapsEffectiveUS: pre.CapsNS / 1000,
	}
}

// preludeFailed reports a failed prelude, with its reason and the fix.
func preludeFailed(rep *reporter, pre PreludeOutcome) int {
	status, fix := spec.ExitEnter, fixCapabilities(selfPath())
	if pre.FailedStep == "network" {
		status = spec.ExitNetwork
	}
	switch pre.Reason.String() {
	case spec.ReasonUsernsLimit:
		fix = "raise user.max_user_namespaces: echo 'user.max_user_namespaces = 15000' > /etc/sysctl.d/90-sandboxd.conf && sysctl --system (`sandboxctl doctor` checks it)"
	case spec.ReasonRoot:
		fix = "start sandboxd as its service user, never as root"
	case spec.ReasonOwnerFile, spec.ReasonOwnerIDs:
		fix = fmt.Sprintf("run `make install`: it creates the namespace-owner user sandboxd-ns and writes %s (one line UID:GID, root-owned); `sandboxctl doctor` checks it", pre.OwnerPath)
	case spec.ReasonFork:
		fix = "the service user's RLIMIT_NPROC is reached: raise it, or run fewer processes as that user"
	case spec.ReasonUsernsRefused:
		fix = "the host refuses user namespaces even with CAP_SYS_ADMIN (an LSM policy or a seccomp filter): allow them for the helper; `sandboxctl doctor` checks it"
	case spec.ReasonSupervisorGone:
		fix = ""
	}
	ef := preludeFacts(pre)
	ef.Reason = pre.Reason.String()
	var failed facts.Helper = ef
	if pre.FailedStep == facts.StepNetwork {
		failed = &facts.Network{Enter: ef}
	}
	if _, err := unix.FcntlInt(uintptr(spec.FDReport), unix.F_GETFD, 0); err != nil {
		// Not started by sandboxd (no report fd): say it on stderr.
		fmt.Fprintf(os.Stderr, "sandboxd-nsinit: %s: %v (reason %s); fix: %s\n", pre.FailedStep, pre.Err(), pre.Reason, fix)
		return status
	}
	return rep.fail(failed, status, pre.Err(), fix)
}

func (l *launch) enter() int {
	ef := preludeFacts(l.pre)
	// The spec first: a pre-started helper (the supervisor's helper pool)
	// waits here, so the config it checks the spec against is read when
	// the launch happens, never before.
	specFile := os.NewFile(spec.FDSpec, "spec")
	s, err := spec.Decode(specFile)
	specFile.Close()
	if err != nil {
		return l.rep.fail(ef, spec.ExitSpec, err, "")
	}
	cfg, err := config.Load(config.DefaultPath)
	if err != nil {
		return l.rep.fail(ef, spec.ExitConfig, err, "reinstall the helper config (make install) so it is root-owned and valid")
	}
	l.cfg = cfg
	l.spec = s
	if err := l.checkSpec(); err != nil {
		return l.rep.fail(ef, spec.ExitSpec, err, "")
	}
	ef.ExecID, ef.CallerUID, ef.Runtime, ef.Probe = s.ExecID, s.CallerUID, s.Runtime, l.probe
	ef.HelperVersion, ef.Config, ef.ConfigSHA256 = Version, config.DefaultPath, fileSHA256(config.DefaultPath)
	ef.UsernsInode = nsInode(fmt.Sprintf("/proc/self/fd/%d", l.pre.UsernsFD))
	ef.OwnUsernsInode = nsInode("/proc/self/ns/user")
	l.fds.Userns = l.pre.UsernsFD

	// The workspace is opened with the caller's euid (the prelude left it
	// so): the supervisor may only hand its own directories to a sandbox.
	ws, err := openWorkspace(cfg.WorkspaceRoot, s.Workspace, l.pre.RUID)
	if err != nil {
		return l.rep.fail(ef, spec.ExitSpec, err, fixWorkspaceRoot)
	}
	l.fds.Workspace = ws
	ef.Workspace = s.Workspace
	if err := l.openEgress(); err != nil {
		return l.rep.fail(ef, spec.ExitSpec, err, fixEgressDir)
	}
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

// fixWorkspaceRoot is the fix when the workspace root is refused.
const fixWorkspaceRoot = "lay out the state directory as make install does: the directory holding workspaces/ (e.g. /var/lib/sandboxd) root-owned and not writable by group or others, workspaces/ itself a real directory owned by the service user"

// openWorkspace opens root/name as an O_PATH directory fd without following
// any symlink and without leaving root, and checks that the supervisor's uid
// owns it: the supervisor may only hand its own directories to a sandbox.
// The root itself is opened with O_NOFOLLOW below a root-owned parent that
// the supervisor cannot write, so it cannot be swapped for a symlink.
func openWorkspace(root, name string, owner int) (int, error) {
	if err := config.CheckRootOwned(filepath.Dir(root)); err != nil {
		return -1, fmt.Errorf("workspace root %q: its parent must be root-owned: %w", root, err)
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open workspace root %q (a symlink is refused): %w", root, err)
	}
	defer unix.Close(rootFD)
	var st unix.Stat_t
	if err := unix.Fstat(rootFD, &st); err != nil {
		return -1, fmt.Errorf("stat workspace root %q: %w", root, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != owner {
		return -1, fmt.Errorf("workspace root %q is not a directory owned by the supervisor's uid %d (mode %o, uid %d)", root, owner, st.Mode, st.Uid)
	}
	// Inheritable on purpose (no O_CLOEXEC): bwrap binds it with --bind-fd.
	fd, err := unix.Openat2(rootFD, name, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, fmt.Errorf("open workspace %q below %q: %w", name, root, err)
	}
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

// netCheck is the network step's check of the prelude's namespace: only
// "lo", up, with loopback addresses. It depends on nothing of a request and
// the namespace is this process's alone (nothing else can enter it: setns
// needs CAP_SYS_ADMIN over the initial user namespace), so Main makes it
// before the spec is read -- a pre-started helper while it waits -- and
// the network step reports it after enter, with the request's mode.
type netCheck struct {
	facts *facts.Network
	err   error
}

func checkNetwork() netCheck {
	nf := &facts.Network{NetnsInode: nsInode("/proc/self/ns/net")}
	links, err := netlink.LinkList()
	if err != nil {
		return netCheck{nf, fmt.Errorf("list links: %w", err)}
	}
	var names []string
	for _, link := range links {
		names = append(names, link.Attrs().Name)
	}
	nf.Links = names
	if len(links) != 1 || links[0].Attrs().Name != "lo" {
		return netCheck{nf, fmt.Errorf("network namespace has links %v, want only lo", names)}
	}
	if links[0].Attrs().Flags&net.FlagUp == 0 {
		return netCheck{nf, errors.New("loopback is down")}
	}
	addrs, err := netlink.AddrList(links[0], netlink.FAMILY_ALL)
	if err != nil {
		return netCheck{nf, fmt.Errorf("list addresses: %w", err)}
	}
	var as []string
	for _, a := range addrs {
		if !a.IP.IsLoopback() {
			return netCheck{nf, fmt.Errorf("non-loopback address %s on lo", a.IPNet)}
		}
		as = append(as, a.IPNet.String())
	}
	nf.Addrs = as
	return netCheck{nf, nil}
}

func (l *launch) network() int {
	nf := l.net.facts
	nf.Mode = l.spec.Network
	if l.net.err != nil {
		return l.rep.fail(nf, spec.ExitNetwork, l.net.err, "")
	}
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
	if pf := l.early.filter; pf.matches(path) {
		sf.ProfileSHA256, sf.BPFSource, sf.SkippedSyscalls = pf.sha, pf.source, pf.skipped
		return l.sealedFilter(sf, pf.bpf, pf.sha, pf.take())
	}
	l.early.filter.release()
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
	return l.sealedFilter(sf, bpf, sha, fd)
}

// sealedFilter records the filter in its sealed memfd fd for bwrap.
func (l *launch) sealedFilter(sf *facts.Seccomp, bpf []byte, sha string, fd int) int {
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

	// Every thread's sets and the leader's full view (as an auditor reads
	// it in /proc) were read back before the spec (early.go: none can come
	// back since); this thread, the one that forks bwrap, again now.
	e := l.early
	if e.capsErr != nil {
		return l.rep.fail(df, spec.ExitDrop, e.capsErr, "")
	}
	for tid, c := range e.threads {
		if c.Held() {
			return l.rep.fail(df, spec.ExitDrop, fmt.Errorf("thread %s still holds capabilities %+v", tid, c), "")
		}
	}
	leader := e.leader
	if leader.Held() {
		return l.rep.fail(df, spec.ExitDrop, fmt.Errorf("the helper still holds capabilities %+v", leader), "")
	}
	if err := thisThreadHoldsNone(); err != nil {
		return l.rep.fail(df, spec.ExitDrop, err, "")
	}
	df.ThreadsChecked = len(e.threads)
	df.CapInh, df.CapPrm, df.CapEff, df.CapAmb, df.CapBnd = leader.Inh, leader.Prm, leader.Eff, leader.Amb, leader.Bnd

	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return l.rep.fail(df, spec.ExitDrop, fmt.Errorf("set no_new_privs: %w", err), "")
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil || nnp != 1 {
		return l.rep.fail(df, spec.ExitDrop, fmt.Errorf("no_new_privs reads back %d: %v", nnp, err), "") //nolint:errorlint // err is nil when the value is wrong; %w would print %!w(<nil>)
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
	em, status := l.environment(xf)
	if status != 0 {
		return status
	}
	// The environment's variables sit below everything else: the
	// request's env (and egress's proxy variables) win.
	env := PayloadEnv(em.env, l.payloadEnv())
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
	argv := BwrapArgs(cfg, l.rt, l.fds, l.spec.TmpSizeBytes, em.binds...)
	xf.Argv = argv
	xf.BwrapEnv = cfg.BaseEnv
	xf.PayloadEnvNames = EnvNames(env)
	xf.MountsSHA256 = l.mountsDigest()
	xf.ProfileSHA256 = l.profileSHA
	xf.HelperVersion = Version
	xf.CodeSHA256 = sha256Hex(l.spec.Code)
	if status := l.awaitRelease(xf); status != 0 {
		return status
	}
	xf.BwrapUID, xf.BwrapGID = l.pre.OwnerUID, l.pre.OwnerGID
	l.becomeSubreaper()
	pid, err := l.forkBwrap(argv)
	if err != nil {
		return l.rep.fail(xf, spec.ExitExec, fmt.Errorf("execve %s: %w", cfg.Bwrap, err), "install bubblewrap: apt-get install bubblewrap")
	}
	l.rep.ok(xf)
	return l.relay(pid)
}

// forkBwrap forks bwrap as the namespace owner and records its pid for
// the SIGTERM handler, holding forking throughout (catchSIGTERM).
func (l *launch) forkBwrap(argv []string) (int, error) {
	cfg := l.cfg
	l.forking.Lock()
	defer l.forking.Unlock()
	// bwrap gets the fixed base environment only: its reaper (pid 1 in the
	// sandbox) keeps it in /proc/1/environ whatever --clearenv does.
	pid, err := syscall.ForkExec(cfg.Bwrap, argv, &syscall.ProcAttr{
		Env: cfg.BaseEnv, Files: []uintptr{0, 1, 2},
		// bwrap refuses a real uid other than its effective one and must
		// own the namespace it joins (--userns): every uid the owner's
		// (execve makes the saved ids the effective ones), so the caller
		// cannot ptrace bwrap while it holds capabilities in the namespace.
		Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: &syscall.Credential{
			Uid: uint32(l.pre.OwnerUID), Gid: uint32(l.pre.OwnerGID), NoSetGroups: true}},
	})
	if err == nil {
		l.bwrapPID.Store(int64(pid))
	}
	return pid, err
}

// relay stays bwrap's parent until bwrap exits, and exits as bwrap did.
//
// Why not exec bwrap: bwrap runs with every uid the namespace owner's, and
// the kernel checks a parent-death signal like a kill(2) from the dying
// parent. The supervisor (the service uid) may not signal bwrap, and bwrap
// may not signal its own reaper once that switched to the payload's uid, so
// neither death would take the sandbox down. This process bridges both: the
// supervisor may signal it (SIGKILL, or its parent-death SIGTERM); its death
// delivers bwrap's parent-death signal (its real uid is the owner's); and on
// the supervisor's death it stops bwrap, kills bwrap's reaper -- which
// takes the sandbox's whole pid namespace with it -- and then bwrap.
func (l *launch) relay(pid int) int {
	for _, fd := range []int{spec.FDReport, spec.FDStatus, spec.FDRelease, l.fds.Userns, l.fds.Seccomp, l.fds.Workspace, l.fds.Env, l.fds.Code} {
		if fd > 2 {
			unix.Close(fd)
		}
	}
	// Only bwrap's tree may hold the payload's stdio: the supervisor reads
	// them to EOF.
	if null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0); err == nil {
		for fd := 0; fd <= 2; fd++ {
			_ = unix.Dup3(null, fd, 0)
		}
		unix.Close(null)
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return spec.ExitExec
		}
		break
	}
	l.finishKeeper(ws.Exited() && l.nothingLeft())
	if ws.Signaled() {
		dieBy(ws.Signal())
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// endKeeper closes the keeper's life pipe -- the keeper kills whatever is
// left in the sandbox's user namespace and exits -- and reaps it (it became
// this process's child in the prelude), so that it is not left to the
// supervisor as a zombie; once only (a second close could hit a reused fd
// number). Bounded: a keeper still tearing its namespace down after a
// second is left to the supervisor, a child subreaper, which reaps it.
func (l *launch) endKeeper() { l.finishKeeper(false) }

// finishKeeper is endKeeper; clean tells the keeper first that nothing is
// left to kill (a clean end, see nothingLeft), and it skips its /proc scan.
func (l *launch) finishKeeper(clean bool) {
	l.keeperDone.Do(func() { endKeeper(l.pre, clean) })
}

// The bytes of a deliberate end on the life pipe (prelude keeper.h): clean
// (nothing left, no scan) or scan (scan now: bwrap is reaped or was never
// forked). A pipe closed with neither is a helper that died, and the
// keeper waits for it to be gone before it scans.
const (
	lifeClean = 'c'
	lifeScan  = 'k'
)

func endKeeper(pre PreludeOutcome, clean bool) {
	if pre.LifeFD > 2 {
		end := byte(lifeScan)
		if clean {
			end = lifeClean
		}
		// One byte into an empty pipe: never blocks, never short.
		_, _ = unix.Write(pre.LifeFD, []byte{end})
		unix.Close(pre.LifeFD)
	}
	if pre.KeeperPID <= 0 {
		return
	}
	deadline := time.Now().Add(time.Second)
	// The keeper's pidfd is readable once it has exited (Linux 5.3): the
	// wait ends with its exit, where polling wait4 every millisecond ended
	// up to a millisecond later, on every launch's path to its answer.
	if pfd, err := unix.PidfdOpen(pre.KeeperPID, 0); err == nil {
		waited := awaitPidfd(pfd, deadline)
		unix.Close(pfd)
		if waited {
			_, _ = unix.Wait4(pre.KeeperPID, nil, unix.WNOHANG, nil)
			return
		}
	}
	for ; time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if pid, err := unix.Wait4(pre.KeeperPID, nil, unix.WNOHANG, nil); pid != 0 || (err != nil && err != unix.EINTR) {
			return
		}
	}
}

// awaitPidfd waits until pfd is readable (its process exited) or the
// deadline passes, and reports whether it could wait at all (false: poll
// failed, the caller falls back to polling wait4).
func awaitPidfd(pfd int, deadline time.Time) bool {
	fds := []unix.PollFd{{Fd: int32(pfd), Events: unix.POLLIN}}
	for left := time.Until(deadline); left > 0; left = time.Until(deadline) {
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return false
		case n > 0:
			return true
		}
	}
	return true
}

// becomeSubreaper makes this process a child subreaper before it forks
// bwrap, so that anything bwrap leaves behind when it exits (its set-up
// child, if bwrap failed before it reaped it) is re-parented here, where
// nothingLeft sees it, rather than to the supervisor. It needs no
// privilege; failing, no end is ever clean and the keeper always scans.
func (l *launch) becomeSubreaper() {
	l.subreaper = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == nil
}

// nothingLeft reports, once bwrap has been reaped, whether nothing the
// keeper exists for is left: no live process that runs as the namespace
// owner, which the service uid may not signal. Everything of the sandbox
// descends from bwrap, and whatever bwrap leaves when it exits is
// re-parented to this subreaper before bwrap can be reaped: normally the
// sandbox's pid 1, which reported the payload's status and is exiting
// (bwrap does not wait for it; it runs as the payload's uid, the service
// uid outside, and the supervisor kills and reaps it by its pidfd), or,
// after a bwrap that failed during set-up, its set-up child, perhaps still
// the owner. A process of the namespace that is not the owner can never
// become it again (the owner is not mapped in the namespace), nor can its
// children. So the end is clean when every child but the keeper is a
// zombie or holds no owner id. Any doubt (no subreaper, an unreadable
// list or status) is "something left".
func (l *launch) nothingLeft() bool {
	if !l.subreaper {
		return false
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + t.Name() + "/children")
		if err != nil {
			return false
		}
		for _, f := range strings.Fields(string(b)) {
			if f != strconv.Itoa(l.pre.KeeperPID) && !harmless(f, l.pre.OwnerUID) {
				return false
			}
		}
	}
	return true
}

// harmless reports whether the process pid is a zombie or none of its
// uids (real, effective, saved, filesystem) is owner.
func harmless(pid string, owner int) bool {
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return false
	}
	var state, uids string
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			switch k {
			case "State":
				state = strings.TrimSpace(v)
			case "Uid":
				uids = v
			}
		}
	}
	if strings.HasPrefix(state, "Z") {
		return true
	}
	ids := strings.Fields(uids)
	if len(ids) != 4 {
		return false
	}
	for _, id := range ids {
		if id == strconv.Itoa(owner) {
			return false
		}
	}
	return true
}

// dieBy ends this process by sig, so that its parent sees bwrap's signal.
// The signal goes to this very thread (tgkill), not the process: a
// process-directed signal may be taken by another thread while this one
// returns and exits 128+sig first. The kernel delivers it before tgkill
// returns to this thread, and the runtime's handler, with no Notify left
// for it, dies by it.
func dieBy(sig syscall.Signal) {
	runtime.LockOSThread()
	signal.Reset(sig)
	_ = unix.Tgkill(unix.Getpid(), unix.Gettid(), sig)
}

// killSandbox stops bwrap (so it forks nothing more), kills its children --
// the reaper, pid 1 of the sandbox, whose death kills the pid namespace --
// and then bwrap.
func killSandbox(bwrap int) {
	_ = unix.Kill(bwrap, unix.SIGSTOP)
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", bwrap, bwrap))
	for _, f := range strings.Fields(string(b)) {
		if child, err := strconv.Atoi(f); err == nil {
			_ = unix.Kill(child, unix.SIGKILL)
		}
	}
	_ = unix.Kill(bwrap, unix.SIGKILL)
}

// awaitRelease waits until the supervisor has placed this process in the
// exec's cgroup (everything bwrap starts must start inside it), takes the
// relay's credentials, and makes sure the supervisor is still there.
func (l *launch) awaitRelease(xf *facts.Exec) int {
	var b [1]byte
	for {
		n, err := unix.Read(spec.FDRelease, b[:])
		if err == unix.EINTR {
			continue
		}
		if n != 1 || err != nil {
			return l.rep.fail(xf, spec.ExitUsage, fmt.Errorf("the supervisor did not release the launch (read fd %d: %d bytes, %v)", spec.FDRelease, n, err), "") //nolint:errorlint // err is nil on a short read; %w would print %!w(<nil>)
		}
		break
	}
	// The supervisor's death must reach this process as a signal it can
	// act on (see relay): SIGTERM is caught since Main began
	// (catchSIGTERM), before the parent-death signal is armed.
	if err := becomeRelay(l.pre); err != nil {
		return l.rep.fail(xf, spec.ExitDrop, err, "")
	}
	if err := supervisorGone(); err != nil {
		xf.Reason = spec.ReasonSupervisorGone
		return l.rep.fail(xf, spec.ExitUsage, err, "")
	}
	return 0
}

// becomeRelay sets the credentials this process keeps while it is bwrap's
// parent: real ids the namespace owner's, effective and saved ids the
// caller's. The caller (supervisor) may then signal it (the kernel accepts
// a sender whose uid matches the target's saved uid), but not ptrace it
// (that needs all three to match); it may signal bwrap (real uid = owner)
// and bwrap's reaper (effective uid = caller). No capability is needed:
// each id is one the process already has. Go applies it to every thread.
// The credential change clears the parent-death signal: it is set again on
// this (locked) thread, the one that forks bwrap, as SIGTERM, so that the
// supervisor's death is handled (relay) rather than just killing this
// process, whose death alone could not take bwrap's reaper down.
func becomeRelay(pre PreludeOutcome) error {
	if err := syscall.Setresgid(pre.OwnerGID, pre.RGID, pre.RGID); err != nil {
		return fmt.Errorf("setresgid(%d, %d, %d): %w", pre.OwnerGID, pre.RGID, pre.RGID, err)
	}
	if err := syscall.Setresuid(pre.OwnerUID, pre.RUID, pre.RUID); err != nil {
		return fmt.Errorf("setresuid(%d, %d, %d): %w", pre.OwnerUID, pre.RUID, pre.RUID, err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGTERM), 0, 0, 0); err != nil {
		return fmt.Errorf("re-arm PR_SET_PDEATHSIG: %w", err)
	}
	return nil
}

// supervisorGone polls the release pipe: the supervisor keeps its write end
// open until it has reaped this process, so a hang-up means it died --
// perhaps before the parent-death signal was re-armed.
func supervisorGone() error {
	p := []unix.PollFd{{Fd: spec.FDRelease, Events: unix.POLLIN}}
	for {
		_, err := unix.Poll(p, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("poll the release pipe: %w", err)
		}
		break
	}
	if p[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
		return errors.New("the supervisor hung up the release pipe (fd 6) before bwrap started: it is gone")
	}
	return nil
}

// MountsDigest is the sha256 of everything that decides what the payload
// can see, for the policy attestation of an exec result. It is the mount
// plan handed to bwrap, not read back from inside the sandbox (that would
// let the attested code write its own attestation), but it includes which
// -try sources exist at launch: bwrap skips a missing one, so a missing
// source must change the digest.
func MountsDigest(cfg *config.Config, tmpSize int64) string {
	b, _ := json.Marshal(struct {
		ROBinds  []string
		Present  []string
		Symlinks []config.Symlink
		Devices  []string
		DevKinds []string
		Shim     string
		TmpSize  int64
		Writable []string
	}{cfg.ROBinds, sourceKinds(cfg.ROBinds), cfg.Symlinks, cfg.Devices, sourceKinds(cfg.Devices), cfg.Shim, tmpSize,
		[]string{"/workspace", "/tmp", "/dev/shm"}})
	return sha256Hex(b)
}

// sourceKinds says, for each bind source, what bwrap will find there
// (following symlinks, as bwrap does): "dir", "file", "dev" or "absent".
func sourceKinds(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		st, err := os.Stat(p)
		switch {
		case err != nil:
			out[i] = "absent"
		case st.IsDir():
			out[i] = "dir"
		case st.Mode()&os.ModeDevice != 0:
			out[i] = "dev"
		default:
			out[i] = "file"
		}
	}
	return out
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
