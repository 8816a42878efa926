package profiles

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// plan is a resolved profile translated to libseccomp terms. Parse builds
// it once; BPF and Install only replay it, so they cannot disagree.
type plan struct {
	defaultAct libseccomp.ScmpAction
	arches     []libseccomp.ScmpArch
	logBit     bool
	ssb        bool
	rules      []planRule
}

type planRule struct {
	name string
	nr   libseccomp.ScmpSyscall
	act  libseccomp.ScmpAction
	// conds is nil for an unconditional rule; otherwise each element is one
	// libseccomp rule (conditions ANDed), and the elements are ORed.
	conds [][]libseccomp.ScmpCondition
}

// syscallMaxArgs is the number of syscall arguments seccomp can see.
const syscallMaxArgs = 6

// toAction converts an OCI action. ERRNO and TRACE without errnoRet default
// to EPERM, as runc does.
func toAction(a specs.LinuxSeccompAction, errnoRet *uint) (libseccomp.ScmpAction, error) {
	ret := int16(unix.EPERM)
	if errnoRet != nil {
		ret = int16(*errnoRet)
	}
	switch a {
	case specs.ActKill, specs.ActKillThread:
		return libseccomp.ActKillThread, nil
	case specs.ActKillProcess:
		return libseccomp.ActKillProcess, nil
	case specs.ActTrap:
		return libseccomp.ActTrap, nil
	case specs.ActErrno:
		return libseccomp.ActErrno.SetReturnCode(ret), nil
	case specs.ActTrace:
		return libseccomp.ActTrace.SetReturnCode(ret), nil
	case specs.ActAllow:
		return libseccomp.ActAllow, nil
	case specs.ActLog:
		return libseccomp.ActLog, nil
	}
	return libseccomp.ActInvalid, fmt.Errorf("action %q cannot be compiled", a)
}

// allows reports whether an action lets the syscall run.
func allows(a libseccomp.ScmpAction) bool {
	return a == libseccomp.ActAllow || a == libseccomp.ActLog
}

func toOp(op specs.LinuxSeccompOperator) (libseccomp.ScmpCompareOp, error) {
	switch op {
	case specs.OpNotEqual:
		return libseccomp.CompareNotEqual, nil
	case specs.OpLessThan:
		return libseccomp.CompareLess, nil
	case specs.OpLessEqual:
		return libseccomp.CompareLessOrEqual, nil
	case specs.OpEqualTo:
		return libseccomp.CompareEqual, nil
	case specs.OpGreaterEqual:
		return libseccomp.CompareGreaterEqual, nil
	case specs.OpGreaterThan:
		return libseccomp.CompareGreater, nil
	case specs.OpMaskedEqual:
		return libseccomp.CompareMaskedEqual, nil
	}
	return libseccomp.CompareInvalid, fmt.Errorf("unknown op %q", op)
}

// conditions translates a rule's args with runc's semantics, so that a
// profile means the same to sandboxd as to the container runtime that
// applies a Localhost profile: conditions on distinct arguments are ANDed in
// one rule; if any argument is compared more than once, every comparison
// becomes a rule of its own (ORed). For MASKED_EQ, value is the mask and
// valueTwo the expected result, as libseccomp's SCMP_CMP_MASKED_EQ.
func conditions(args []specs.LinuxSeccompArg) ([][]libseccomp.ScmpCondition, error) {
	if len(args) == 0 {
		return nil, nil
	}
	var counts [syscallMaxArgs]int
	conds := make([]libseccomp.ScmpCondition, 0, len(args))
	for _, a := range args {
		if a.Index >= syscallMaxArgs {
			return nil, fmt.Errorf("argument index %d out of range", a.Index)
		}
		op, err := toOp(a.Op)
		if err != nil {
			return nil, err
		}
		vals := []uint64{a.Value}
		if a.Op == specs.OpMaskedEqual {
			vals = append(vals, a.ValueTwo)
		}
		c, err := libseccomp.MakeCondition(a.Index, op, vals...)
		if err != nil {
			return nil, err
		}
		counts[a.Index]++
		conds = append(conds, c)
	}
	for _, n := range counts {
		if n > 1 {
			out := make([][]libseccomp.ScmpCondition, len(conds))
			for i, c := range conds {
				out[i] = []libseccomp.ScmpCondition{c}
			}
			return out, nil
		}
	}
	return [][]libseccomp.ScmpCondition{conds}, nil
}

// buildPlan translates a resolved profile and checks that libseccomp can
// express it exactly. It returns the deny rules it had to skip.
func buildPlan(sc *specs.LinuxSeccomp) (*plan, []string, error) {
	def, err := toAction(sc.DefaultAction, sc.DefaultErrnoRet)
	if err != nil {
		return nil, nil, fmt.Errorf("defaultAction: %w", err)
	}
	pl := &plan{defaultAct: def}
	for _, a := range sc.Architectures {
		name, ok := specArchToLibseccomp[a]
		if !ok {
			return nil, nil, fmt.Errorf("unknown arch %q", a)
		}
		sa, err := libseccomp.GetArchFromString(name)
		if err != nil {
			return nil, nil, fmt.Errorf("arch %s: %w", a, err)
		}
		pl.arches = append(pl.arches, sa)
	}
	for _, fl := range sc.Flags {
		switch fl {
		case "SECCOMP_FILTER_FLAG_TSYNC":
			// Always set by libseccomp-golang; Install requires it.
		case specs.LinuxSeccompFlagLog:
			pl.logBit = true
		case specs.LinuxSeccompFlagSpecAllow:
			pl.ssb = true
		default:
			return nil, nil, fmt.Errorf("unsupported flag %q", fl)
		}
	}

	type seen struct {
		uncond   []libseccomp.ScmpAction
		condActs []libseccomp.ScmpAction
		name     string
	}
	bySyscall := map[libseccomp.ScmpSyscall]*seen{}
	var skipped []string
	for i, call := range sc.Syscalls {
		act, err := toAction(call.Action, call.ErrnoRet)
		if err != nil {
			return nil, nil, fmt.Errorf("syscalls[%d]: %w", i, err)
		}
		conds, err := conditions(call.Args)
		if err != nil {
			return nil, nil, fmt.Errorf("syscalls[%d]: %w", i, err)
		}
		for _, name := range call.Names {
			nr, err := libseccomp.GetSyscallFromName(name)
			if err != nil {
				// This libseccomp does not know the syscall (typically
				// newer than the library). It gets the default action.
				if allows(act) {
					continue // dropping an allow only makes the filter stricter
				}
				if allows(def) {
					return nil, nil, fmt.Errorf("syscalls[%d]: %s rule for %q cannot be compiled by libseccomp %s, and the default action %s would allow it",
						i, call.Action, name, libseccompVersion(), sc.DefaultAction)
				}
				skipped = append(skipped, fmt.Sprintf("%s(%s)", name, actionString(call.Action, call.ErrnoRet)))
				continue
			}
			s := bySyscall[nr]
			if s == nil {
				s = &seen{name: name}
				bySyscall[nr] = s
			}
			if conds == nil {
				s.uncond = append(s.uncond, act)
			} else {
				s.condActs = append(s.condActs, act)
			}
			if act == def {
				// Redundant with the default; libseccomp refuses such a
				// rule, and runc skips it the same way.
				continue
			}
			pl.rules = append(pl.rules, planRule{name: name, nr: nr, act: act, conds: conds})
		}
	}
	// libseccomp lets an unconditional rule silently replace every
	// conditional rule for the same syscall (and a second unconditional
	// rule replace the first). A profile that relies on rule order cannot
	// be expressed; refuse it rather than guess.
	for _, s := range bySyscall {
		if len(s.uncond) == 0 {
			continue
		}
		for _, a := range append(s.uncond[1:], s.condActs...) {
			if a != s.uncond[0] {
				return nil, nil, fmt.Errorf("syscall %q has an unconditional rule and other rules with a different action; libseccomp would keep only one of them", s.name)
			}
		}
	}
	sort.Strings(skipped)
	return pl, compact(skipped), nil
}

func compact(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func actionString(a specs.LinuxSeccompAction, errnoRet *uint) string {
	if errnoRet != nil {
		return fmt.Sprintf("%s:%d", a, *errnoRet)
	}
	return string(a)
}

func libseccompVersion() string {
	maj, min, mic := libseccomp.GetLibraryVersion()
	return fmt.Sprintf("%d.%d.%d", maj, min, mic)
}

// newFilter builds a libseccomp filter from the plan. withFlags applies the
// profile's filter flags, which only matter when the filter is loaded with
// seccomp(2); they cannot be carried in an exported cBPF program.
func (pl *plan) newFilter(withFlags bool) (*libseccomp.ScmpFilter, error) {
	f, err := libseccomp.NewFilter(pl.defaultAct)
	if err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Release()
		}
	}()
	for _, a := range pl.arches {
		if err := f.AddArch(a); err != nil {
			return nil, fmt.Errorf("add arch %s: %w", a, err)
		}
	}
	if withFlags {
		if pl.logBit {
			if err := f.SetLogBit(true); err != nil {
				return nil, fmt.Errorf("flag %s: %w", specs.LinuxSeccompFlagLog, err)
			}
		}
		if pl.ssb {
			if err := f.SetSSB(true); err != nil {
				return nil, fmt.Errorf("flag %s: %w", specs.LinuxSeccompFlagSpecAllow, err)
			}
		}
	}
	// Binary-tree dispatch for long rule sets, as runc does. Only a
	// performance attribute; older libseccomp without it still compiles
	// the same rules.
	if len(pl.rules) > 32 {
		_ = f.SetOptimize(2)
	}
	for _, r := range pl.rules {
		if r.conds == nil {
			if err := f.AddRule(r.nr, r.act); err != nil {
				return nil, fmt.Errorf("rule %s: %w", r.name, err)
			}
			continue
		}
		for _, cs := range r.conds {
			if err := f.AddRuleConditional(r.nr, r.act, cs); err != nil {
				return nil, fmt.Errorf("rule %s: %w", r.name, err)
			}
		}
	}
	ok = true
	return f, nil
}

// BPF compiles the profile with libseccomp for the native architecture and
// the profile's sub-architectures (Docker's archMap: i386 and x32 on
// x86_64) and returns the classic BPF program, an array of struct
// sock_filter (8 bytes each) in native byte order: what bubblewrap reads
// from --seccomp FD and what seccomp_export_bpf writes.
//
// The profile's flags (SECCOMP_FILTER_FLAG_LOG, _SPEC_ALLOW) are not part of
// a cBPF program; losing them never loosens the filter.
func (p *Profile) BPF() ([]byte, error) {
	if p == nil || p.plan == nil {
		return nil, errors.New("profiles: BPF on a profile that was not parsed")
	}
	f, err := p.plan.newFilter(false)
	if err != nil {
		return nil, fmt.Errorf("profiles: %s: compile: %w", p.Name, err)
	}
	defer f.Release()

	// libseccomp < 2.6 has no seccomp_export_bpf_mem; export into a memfd.
	fd, err := unix.MemfdCreate("sandboxd-seccomp-bpf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("profiles: memfd_create: %w", err)
	}
	mf := os.NewFile(uintptr(fd), "seccomp-bpf")
	defer mf.Close()
	if err := f.ExportBPF(mf); err != nil {
		return nil, fmt.Errorf("profiles: %s: export: %w", p.Name, err)
	}
	if _, err := mf.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	prog, err := io.ReadAll(mf)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	if len(prog) == 0 || len(prog)%sockFilterSize != 0 {
		return nil, fmt.Errorf("profiles: %s: libseccomp exported %d bytes, not a sock_filter array", p.Name, len(prog))
	}
	if n := len(prog) / sockFilterSize; n > bpfMaxInsns {
		return nil, fmt.Errorf("profiles: %s: %d BPF instructions, the kernel accepts at most %d", p.Name, n, bpfMaxInsns)
	}
	return prog, nil
}

const (
	sockFilterSize = 8    // sizeof(struct sock_filter)
	bpfMaxInsns    = 4096 // BPF_MAXINSNS
)

// Install loads the filter into the calling process: all of its threads,
// through libseccomp's SCMP_FLTATR_CTL_TSYNC (which libseccomp-golang sets on
// every filter; Install refuses to run on a kernel or library without it).
//
// It does not set no_new_privs itself when the calling thread holds
// CAP_SYS_ADMIN (libseccomp's SCMP_FLTATR_CTL_NNP is set to false), so that
// file capabilities keep working after a later exec: that is how a container
// runtime applies a Localhost profile. Without CAP_SYS_ADMIN the kernel only
// accepts a filter under no_new_privs, so Install sets it.
//
// The profile's flags are honoured; if one cannot be set, nothing is loaded.
// A filter cannot be removed: on error after the load the process must be
// considered filtered.
func (p *Profile) Install() error {
	if p == nil || p.plan == nil {
		return errors.New("profiles: Install on a profile that was not parsed")
	}
	// Capabilities are per thread and the kernel checks the thread that
	// loads the filter: check and load on the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	if api, err := libseccomp.GetAPI(); err != nil || api < 2 {
		return fmt.Errorf("profiles: seccomp thread sync (TSYNC) unavailable (libseccomp API level %d, %v); refusing to filter only one thread", api, err) //nolint:errorlint // err is nil when only the API level is too low; %w would print %!w(<nil>)
	}
	admin, err := hasEffectiveCap(unix.CAP_SYS_ADMIN)
	if err != nil {
		return fmt.Errorf("profiles: capget: %w", err)
	}
	f, err := p.plan.newFilter(true)
	if err != nil {
		return fmt.Errorf("profiles: %s: compile: %w", p.Name, err)
	}
	defer f.Release()
	if err := f.SetNoNewPrivsBit(!admin); err != nil {
		return fmt.Errorf("profiles: set no_new_privs attribute: %w", err)
	}
	if err := f.Load(); err != nil {
		return fmt.Errorf("profiles: %s: load: %w", p.Name, err)
	}
	// Belt and braces: the calling thread must now be in filter mode. Any
	// error from prctl itself can only come from a filter.
	if mode, err := unix.PrctlRetInt(unix.PR_GET_SECCOMP, 0, 0, 0, 0); err == nil && mode != 2 {
		return fmt.Errorf("profiles: %s: seccomp mode is %d after load", p.Name, mode)
	}
	return nil
}

// hasEffectiveCap reports whether the calling thread has capability c in
// its effective set.
func hasEffectiveCap(c uint) (bool, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false, err
	}
	return data[c/32].Effective&(1<<(c%32)) != 0, nil
}
