// Command gen writes sandboxd's seccomp profiles, payload.json and
// kubernetes-worker.json, from Docker's default profile
// (github.com/moby/profiles/seccomp DefaultProfile), the reviewed base they
// tighten. Run it through `go generate ./profiles`; the output is committed
// and embedded by package profiles. `-check` compares instead of writing.
//
// Both outputs are deterministic: they depend on the pinned moby/profiles
// version and this file only, never on the machine that runs the generator
// (architecture and minKernel conditions are kept for the runtime to
// resolve, as Docker does).
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/atomicfile"
)

func main() {
	out := flag.String("out", ".", "directory to write the profiles into")
	check := flag.Bool("check", false, "fail if the files in -out differ from the generated ones")
	flag.Parse()
	files, err := Generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	for _, name := range sortedKeys(files) {
		path := filepath.Join(*out, name)
		if *check {
			have, err := os.ReadFile(path)
			if err != nil || !bytes.Equal(have, files[name]) {
				fmt.Fprintf(os.Stderr, "gen: %s is out of date; run go generate ./profiles\n", path)
				os.Exit(1)
			}
			continue
		}
		if err := atomicfile.WriteFile(path, files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}

// Generate returns the file name -> JSON bytes of every profile.
func Generate() (map[string][]byte, error) {
	payload, err := Payload()
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	worker, err := Worker()
	if err != nil {
		return nil, fmt.Errorf("kubernetes-worker: %w", err)
	}
	files := map[string][]byte{}
	for name, p := range map[string]*mobyseccomp.Seccomp{"payload.json": payload, "kubernetes-worker.json": worker} {
		if err := checkExpressible(p); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		b, err := json.MarshalIndent(p, "", "\t")
		if err != nil {
			return nil, err
		}
		files[name] = append(b, '\n')
	}
	return files, nil
}

func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}

// ---------------------------------------------------------------------------
// The payload profile.

var (
	enosys = uint(unix.ENOSYS)
	eperm  = uint(unix.EPERM)
	// What a kernel built without an address family, or without an IP or
	// netlink protocol, answers: programs fall back from both.
	eafnosupport    = uint(unix.EAFNOSUPPORT)
	eprotonosupport = uint(unix.EPROTONOSUPPORT)
)

// payloadDenies are the syscalls the payload must never make, each group
// with the reason a reviewer reads in the JSON. They are removed from every
// allow rule of Docker's profile and answer EPERM.
var payloadDenies = []struct {
	comment string
	names   []string
}{
	{"sandboxd: namespaces are built by nsinit and bwrap, never by the payload (clone with CLONE_NEW* flags is denied by the clone rules below)",
		[]string{"setns", "unshare"}},
	{"sandboxd: the mount family; the payload's filesystem view is fixed by bwrap",
		[]string{"fsconfig", "fsmount", "fsopen", "fspick", "mount", "mount_setattr", "move_mount", "open_tree", "pivot_root", "umount", "umount2"}},
	{"sandboxd: tracing and cross-process memory access (Docker allows them on kernels >= 4.8)",
		[]string{"process_vm_readv", "process_vm_writev", "ptrace"}},
	{"sandboxd: kernel attack surface a payload does not need: eBPF, perf, userfaultfd, io_uring, keyrings",
		[]string{"add_key", "bpf", "io_uring_enter", "io_uring_register", "io_uring_setup", "keyctl", "perf_event_open", "request_key", "userfaultfd"}},
	{"sandboxd: kernel images and modules",
		[]string{"delete_module", "finit_module", "init_module", "kexec_file_load", "kexec_load"}},
	{"sandboxd: file handles resolve paths outside the mount namespace's view (Docker allows name_to_handle_at)",
		[]string{"name_to_handle_at", "open_by_handle_at"}},
	{"sandboxd: host administration",
		[]string{"acct", "chroot", "lookup_dcookie", "quotactl", "quotactl_fd", "reboot", "swapoff", "swapon", "syslog"}},
	{"sandboxd: the system clock (Docker allows adjtimex and clock_adjtime, which can only read it without CAP_SYS_TIME)",
		[]string{"adjtimex", "clock_adjtime", "clock_adjtime64", "clock_settime", "clock_settime64", "settimeofday", "stime"}},
	{"sandboxd: socketcall (32-bit ABIs, reachable from x86_64 through int 0x80) hides socket()'s arguments from seccomp and so bypasses the socket domain allow-list",
		[]string{"socketcall"}},
}

// Payload builds payload.json: Docker's default profile resolved for a
// process with no capabilities, minus payloadDenies, with every syscall the
// profile knows but does not allow answering EPERM and everything else
// ENOSYS; socket and socketpair follow sandboxd's own family and protocol
// list (socketRules), not Docker's.
func Payload() (*mobyseccomp.Seccomp, error) {
	base := mobyseccomp.DefaultProfile()
	capNames := capGatedNames(base)
	p := resolveCaps(base, func(string) (held, decided bool) { return false, true })

	denied := map[string]bool{}
	for _, g := range payloadDenies {
		for _, n := range g.names {
			denied[n] = true
		}
	}
	// Remove the denied syscalls from Docker's rules.
	var kept []*mobyseccomp.Syscall
	for _, s := range p.Syscalls {
		s.Names = slices.DeleteFunc(s.Names, func(n string) bool { return denied[n] })
		if len(s.Names) > 0 {
			kept = append(kept, s)
		}
	}
	p.Syscalls = kept

	p.DefaultAction = specs.ActErrno
	p.DefaultErrnoRet = &enosys

	// The payload gets the native ABI only. A 32-bit syscall (int 0x80 on
	// x86_64) is a second, older way into the kernel, and on it libseccomp
	// compares only the low 32 bits of arguments; python and node never use
	// it. Without sub-architectures in the filter, a syscall made through
	// one hits libseccomp's bad-architecture action and the thread is
	// killed. (It also cuts compiling from ~200 ms to ~7 ms.)
	for i := range p.ArchMap {
		p.ArchMap[i].SubArches = nil
	}

	for _, g := range payloadDenies {
		p.Syscalls = append(p.Syscalls, deny(g.comment, g.names...))
	}

	// Syscalls Docker's profile allows only with a capability the payload
	// does not have: they are known, so they answer EPERM like in Docker,
	// not ENOSYS.
	covered := map[string]bool{}
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			covered[n] = true
		}
	}
	var capOnly []string
	for _, n := range capNames {
		if !covered[n] {
			capOnly = append(capOnly, n)
		}
	}
	if len(capOnly) > 0 {
		p.Syscalls = append(p.Syscalls, deny("sandboxd: allowed by Docker's profile only with a capability the payload never has", capOnly...))
	}

	// Syscalls Docker allows only for some argument values: the other
	// values answer EPERM too, through rules that cover exactly the
	// complement (libseccomp cannot combine an unconditional rule with
	// conditional ones for the same syscall).
	cloneRules, err := cloneDenies(p)
	if err != nil {
		return nil, err
	}
	p.Syscalls = append(p.Syscalls, cloneRules...)
	rules, err := complementDenies(p, "personality", 0)
	if err != nil {
		return nil, err
	}
	p.Syscalls = append(p.Syscalls, rules...)

	// socket and socketpair: sandboxd's own family and protocol list
	// replaces Docker's (see socketRules).
	p.Syscalls, err = withoutDockerSocketRules(p.Syscalls)
	if err != nil {
		return nil, err
	}
	for _, name := range []string{"socket", "socketpair"} {
		p.Syscalls = append(p.Syscalls, socketRules(name)...)
	}
	return p, nil
}

func deny(comment string, names ...string) *mobyseccomp.Syscall {
	names = slices.Clone(names)
	sort.Strings(names)
	return &mobyseccomp.Syscall{
		LinuxSyscall: specs.LinuxSyscall{Names: names, Action: specs.ActErrno, ErrnoRet: &eperm},
		Comment:      comment,
	}
}

// capGatedNames lists, sorted, every syscall that Docker's profile allows
// only under a capability condition.
func capGatedNames(p *mobyseccomp.Seccomp) []string {
	set := map[string]bool{}
	for _, s := range p.Syscalls {
		if s.Includes != nil && len(s.Includes.Caps) > 0 {
			for _, n := range s.Names {
				set[n] = true
			}
		}
	}
	return sortedKeys(set)
}

// resolveCaps applies Docker's capability conditions for the capabilities
// that held decides, and keeps the undecided ones (and every arch and
// minKernel condition) for the runtime to resolve:
//
//   - includes.caps: the rule needs ALL of them; one decided absent drops
//     the rule, decided present ones are removed from the list;
//   - excludes.caps: ANY of them held drops the rule; decided absent ones
//     are removed from the list.
func resolveCaps(p *mobyseccomp.Seccomp, held func(c string) (held, decided bool)) *mobyseccomp.Seccomp {
	out := *p
	out.Syscalls = nil
rules:
	for _, s := range p.Syscalls {
		c := *s
		c.Names = slices.Clone(s.Names)
		if s.Includes != nil {
			inc := *s.Includes
			inc.Caps = nil
			for _, cp := range s.Includes.Caps {
				h, d := held(cp)
				switch {
				case d && !h:
					continue rules
				case !d:
					inc.Caps = append(inc.Caps, cp)
				}
			}
			c.Includes = emptyToNil(&inc)
		}
		if s.Excludes != nil {
			exc := *s.Excludes
			exc.Caps = nil
			for _, cp := range s.Excludes.Caps {
				h, d := held(cp)
				switch {
				case d && h:
					continue rules
				case !d:
					exc.Caps = append(exc.Caps, cp)
				}
			}
			c.Excludes = emptyToNil(&exc)
		}
		out.Syscalls = append(out.Syscalls, &c)
	}
	return &out
}

func emptyToNil(f *mobyseccomp.Filter) *mobyseccomp.Filter {
	if len(f.Caps) == 0 && len(f.Arches) == 0 && f.MinKernel == nil {
		return nil
	}
	return f
}

// namespaceFlags are the clone flags that create a namespace. Docker allows
// clone only when none is set (without CAP_SYS_ADMIN).
var namespaceFlags = []struct {
	name string
	flag uint64
}{
	{"CLONE_NEWNS", unix.CLONE_NEWNS}, {"CLONE_NEWUTS", unix.CLONE_NEWUTS},
	{"CLONE_NEWIPC", unix.CLONE_NEWIPC}, {"CLONE_NEWUSER", unix.CLONE_NEWUSER},
	{"CLONE_NEWPID", unix.CLONE_NEWPID}, {"CLONE_NEWNET", unix.CLONE_NEWNET},
	{"CLONE_NEWCGROUP", unix.CLONE_NEWCGROUP},
}

// cloneDenies returns the EPERM rules for clone with any namespace flag, the
// exact complement of Docker's allow rule "flags & mask == 0": one
// MASKED_EQ rule per flag, on argument 0, or argument 1 on s390 where
// clone's parameters are ordered differently (Docker's own split).
func cloneDenies(p *mobyseccomp.Seccomp) ([]*mobyseccomp.Syscall, error) {
	var mask uint64
	for _, f := range namespaceFlags {
		mask |= f.flag
	}
	// Check that the base still has exactly the rules we complement.
	var found int
	for _, s := range p.Syscalls {
		if slices.Contains(s.Names, "clone") {
			if len(s.Names) != 1 || s.Action != specs.ActAllow || len(s.Args) != 1 ||
				s.Args[0].Op != specs.OpMaskedEqual || s.Args[0].Value != mask || s.Args[0].ValueTwo != 0 {
				return nil, fmt.Errorf("unexpected clone rule in the base profile: %+v", s.LinuxSyscall)
			}
			found++
		}
	}
	if found != 2 {
		return nil, fmt.Errorf("expected Docker's two clone rules, found %d", found)
	}
	var out []*mobyseccomp.Syscall
	for _, variant := range []struct {
		index    uint
		includes *mobyseccomp.Filter
		excludes *mobyseccomp.Filter
		where    string
	}{
		{0, nil, &mobyseccomp.Filter{Arches: []string{"s390", "s390x"}}, ""},
		{1, &mobyseccomp.Filter{Arches: []string{"s390", "s390x"}}, nil, " (s390 parameter order)"},
	} {
		for _, f := range namespaceFlags {
			out = append(out, &mobyseccomp.Syscall{
				LinuxSyscall: specs.LinuxSyscall{
					Names: []string{"clone"}, Action: specs.ActErrno, ErrnoRet: &eperm,
					Args: []specs.LinuxSeccompArg{{Index: variant.index, Value: f.flag, ValueTwo: f.flag, Op: specs.OpMaskedEqual}},
				},
				Comment:  fmt.Sprintf("sandboxd: clone with %s%s", f.name, variant.where),
				Includes: variant.includes,
				Excludes: variant.excludes,
			})
		}
	}
	return out, nil
}

type interval struct{ lo, hi uint64 } // inclusive

// complementDenies returns EPERM rules for every value of argument idx of
// syscall name that Docker's (unconditioned) allow rules do not allow. The
// allow rules must each compare argument idx once with EQ, LT, LE, GT or GE.
func complementDenies(p *mobyseccomp.Seccomp, name string, idx uint) ([]*mobyseccomp.Syscall, error) {
	var allowed []interval
	for _, s := range p.Syscalls {
		if !slices.Contains(s.Names, name) {
			continue
		}
		if len(s.Names) != 1 || s.Action != specs.ActAllow || len(s.Args) != 1 || s.Args[0].Index != idx ||
			s.Includes != nil || s.Excludes != nil {
			return nil, fmt.Errorf("unexpected %s rule in the base profile: %+v", name, s.LinuxSyscall)
		}
		a := s.Args[0]
		var iv interval
		switch a.Op {
		case specs.OpEqualTo:
			iv = interval{a.Value, a.Value}
		case specs.OpLessThan:
			if a.Value == 0 {
				continue
			}
			iv = interval{0, a.Value - 1}
		case specs.OpLessEqual:
			iv = interval{0, a.Value}
		case specs.OpGreaterThan:
			if a.Value == math.MaxUint64 {
				continue
			}
			iv = interval{a.Value + 1, math.MaxUint64}
		case specs.OpGreaterEqual:
			iv = interval{a.Value, math.MaxUint64}
		default:
			return nil, fmt.Errorf("%s: cannot complement op %s", name, a.Op)
		}
		allowed = append(allowed, iv)
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("no allow rule for %s in the base profile", name)
	}
	var out []*mobyseccomp.Syscall
	for _, gap := range complement(allowed) {
		for _, arg := range coverInterval(gap, idx) {
			out = append(out, &mobyseccomp.Syscall{
				LinuxSyscall: specs.LinuxSyscall{
					Names: []string{name}, Action: specs.ActErrno, ErrnoRet: &eperm,
					Args: []specs.LinuxSeccompArg{arg},
				},
				Comment: fmt.Sprintf("sandboxd: %s, argument %d in %s, not allowed by Docker's profile", name, idx, describe(arg)),
			})
		}
	}
	return out, nil
}

// complement returns the sorted gaps of [0, MaxUint64] not covered by ivs.
func complement(ivs []interval) []interval {
	ivs = slices.Clone(ivs)
	slices.SortFunc(ivs, func(a, b interval) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var gaps []interval
	next := uint64(0) // first value not yet known to be covered
	done := false
	for _, iv := range ivs {
		if done {
			break
		}
		if iv.lo > next {
			gaps = append(gaps, interval{next, iv.lo - 1})
		}
		if iv.hi >= next {
			if iv.hi == math.MaxUint64 {
				done = true
			} else {
				next = iv.hi + 1
			}
		}
	}
	if !done {
		gaps = append(gaps, interval{next, math.MaxUint64})
	}
	return gaps
}

// coverInterval returns single comparisons whose union is exactly the
// interval: LT/GE for intervals open to one end, EQ for a single value,
// else aligned power-of-two blocks as MASKED_EQ (value = mask,
// valueTwo = block start), each a rule of its own.
func coverInterval(iv interval, idx uint) []specs.LinuxSeccompArg {
	switch {
	case iv.lo == 0 && iv.hi == math.MaxUint64:
		return []specs.LinuxSeccompArg{{Index: idx, Value: 0, Op: specs.OpGreaterEqual}}
	case iv.lo == 0:
		return []specs.LinuxSeccompArg{{Index: idx, Value: iv.hi + 1, Op: specs.OpLessThan}}
	case iv.hi == math.MaxUint64:
		return []specs.LinuxSeccompArg{{Index: idx, Value: iv.lo, Op: specs.OpGreaterEqual}}
	}
	var out []specs.LinuxSeccompArg
	lo := iv.lo
	for {
		if lo == iv.hi {
			out = append(out, specs.LinuxSeccompArg{Index: idx, Value: lo, Op: specs.OpEqualTo})
			break
		}
		// Largest aligned block starting at lo that stays inside [lo, hi].
		size := uint(bits.TrailingZeros64(lo)) // alignment of lo (64 when lo == 0, excluded above)
		for size > 0 && (size >= 64 || lo+(uint64(1)<<size)-1 > iv.hi || lo+(uint64(1)<<size)-1 < lo) {
			size--
		}
		if size == 0 {
			out = append(out, specs.LinuxSeccompArg{Index: idx, Value: lo, Op: specs.OpEqualTo})
		} else {
			out = append(out, specs.LinuxSeccompArg{Index: idx, Value: ^(uint64(1)<<size - 1), ValueTwo: lo, Op: specs.OpMaskedEqual})
		}
		end := lo + (uint64(1) << size) - 1
		if end >= iv.hi {
			break
		}
		lo = end + 1
	}
	return out
}

func describe(a specs.LinuxSeccompArg) string {
	switch a.Op {
	case specs.OpEqualTo:
		return fmt.Sprintf("{%#x}", a.Value)
	case specs.OpLessThan:
		return fmt.Sprintf("[0, %#x)", a.Value)
	case specs.OpGreaterEqual:
		return fmt.Sprintf("[%#x, max]", a.Value)
	case specs.OpMaskedEqual:
		return fmt.Sprintf("[%#x, %#x]", a.ValueTwo, a.ValueTwo|^a.Value)
	}
	return string(a.Op)
}

// ---------------------------------------------------------------------------
// The Kubernetes worker profile.

// workerAdditions are the only syscalls added to Docker's default profile
// for the supervisor's container, each with the failure observed (under
// strace, bwrap 0.8.0) without it. The profiles tests run bwrap under this
// profile, as root and as uid 65534. Not added because nothing failed
// without them: umount (no x86_64 syscall), the new mount API (fsopen, move_mount, open_tree,
// mount_setattr), chroot, keyctl.
var workerAdditions = []struct {
	name    string
	comment string
}{
	{"clone", "sandboxd: bwrap creates its namespaces with a raw clone(CLONE_NEWNS|CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS|CLONE_NEWCGROUP); Docker's rule allows clone only without namespace flags (bwrap: No permissions to create new namespace). Replaces Docker's two clone rules"},
	{"unshare", "sandboxd: bwrap --unshare-user with --uid/--gid and --dev (or --disable-userns) unshares a second user namespace to map the sandbox uid (bwrap: unshare user ns: Operation not permitted); nsinit unshares its user, mount and network namespaces"},
	{"setns", "sandboxd: bwrap --userns FD joins the user namespace nsinit created (bwrap: Joining specified user namespace failed: Operation not permitted)"},
	{"mount", "sandboxd: bwrap makes / a slave mount and builds the sandbox with bind, tmpfs, proc and remount mounts (bwrap: Failed to make / slave: Operation not permitted)"},
	{"pivot_root", "sandboxd: bwrap pivots into the sandbox's root (bwrap: pivot_root: Operation not permitted)"},
	{"sethostname", "sandboxd: nsinit asks bwrap for --hostname sandbox, so the payload does not learn the host's name; it sets it in the sandbox's own UTS namespace (bwrap: Can't set hostname to sandbox: Operation not permitted)"},
	{"umount2", "sandboxd: bwrap detaches the old root after pivot_root, umount2(oldroot, MNT_DETACH) (bwrap: unmount old root: Operation not permitted)"},
}

// Worker builds kubernetes-worker.json: Docker's default profile resolved
// for a container without CAP_SYS_ADMIN (the other capability conditions
// stay, for the runtime to resolve against the container's real set), plus
// workerAdditions.
//
// The default action stays Docker's SCMP_ACT_ERRNO with EPERM rather than
// ENOSYS: this file is applied by the container runtime (runc, crun), which
// already answers ENOSYS for syscalls newer than anything the profile names
// (runc's patchbpf), and EPERM for a known-but-denied syscall such as
// mount or sethostname is what programs and operators expect from Docker's
// profile; ENOSYS there would send them down "kernel too old" fallbacks.
func Worker() (*mobyseccomp.Seccomp, error) {
	base := mobyseccomp.DefaultProfile()
	p := resolveCaps(base, func(c string) (held, decided bool) {
		if c == "CAP_SYS_ADMIN" {
			return false, true
		}
		return false, false
	})
	p.DefaultAction = specs.ActErrno
	p.DefaultErrnoRet = &eperm
	for _, a := range workerAdditions {
		if a.name == "clone" {
			// An unconditional clone allow replaces Docker's "no
			// namespace flag" rules (an unconditional rule would override
			// them in libseccomp anyway).
			p.Syscalls = slices.DeleteFunc(p.Syscalls, func(s *mobyseccomp.Syscall) bool {
				return slices.Equal(s.Names, []string{"clone"})
			})
		}
		p.Syscalls = append(p.Syscalls, &mobyseccomp.Syscall{
			LinuxSyscall: specs.LinuxSyscall{Names: []string{a.name}, Action: specs.ActAllow},
			Comment:      a.comment,
		})
	}
	return p, nil
}

// checkExpressible refuses a profile in which a syscall has an
// unconditional rule and another rule with a different action (on any
// architecture): libseccomp would silently keep only one of them.
func checkExpressible(p *mobyseccomp.Seccomp) error {
	uncond := map[string]specs.LinuxSyscall{}
	for _, s := range p.Syscalls {
		if len(s.Args) == 0 {
			for _, n := range s.Names {
				uncond[n] = s.LinuxSyscall
			}
		}
	}
	for _, s := range p.Syscalls {
		for _, n := range s.Names {
			u, ok := uncond[n]
			if !ok {
				continue
			}
			if u.Action != s.Action || !equalErrno(u.ErrnoRet, s.ErrnoRet) {
				return fmt.Errorf("syscall %s has an unconditional rule and a rule with another action", n)
			}
		}
	}
	return nil
}

func equalErrno(a, b *uint) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// ---------------------------------------------------------------------------
// Socket families and protocols of the payload.

// Docker's profile allows about 30 address families (its container list:
// RDS, TIPC, RXRPC, SMC, KCM, X.25, CAN, Bluetooth, PPPoX, QIPCRTR, MCTP,
// NETLINK with any protocol, ...). socket(2) and socketpair(2) on a family
// or an IP protocol the kernel has not registered make it call
// request_module("net-pf-N") or ("net-pf-N-proto-P-type-T") for an
// unprivileged caller, and the family's create function runs either way:
// modules that have been a steady source of privilege escalations
// (CVE-2010-3904 RDS, CVE-2017-6074 DCCP, CVE-2016-10200 L2TP,
// CVE-2021-43267 and CVE-2022-0435 TIPC). A Python or JavaScript payload on
// a loopback-only network needs none of them.
//
// Allowed, for socket and socketpair alike:
//   - AF_UNIX, any type and protocol (the kernel checks the protocol itself
//     and loads nothing);
//   - AF_INET and AF_INET6 with protocol 0, IPPROTO_TCP or IPPROTO_UDP, the
//     values libc's getaddrinfo and libuv pass. SOCK_RAW stays refused by
//     the kernel: the network namespace belongs to the initial user
//     namespace, where the payload has no CAP_NET_RAW;
//   - AF_NETLINK with NETLINK_ROUTE only. Node's os.networkInterfaces()
//     (libuv uv_interface_addresses, glibc getifaddrs) and Python's
//     socket.if_nameindex() fail without it; getaddrinfo, also with
//     AI_ADDRCONFIG, does not need it (glibc's __check_pf assumes both IPv4
//     and IPv6 when the netlink socket fails). Every rtnetlink request that
//     changes something needs CAP_NET_ADMIN over that same initial user
//     namespace, so the payload can only read lo's state.
//
// Everything else answers what a kernel without the family or protocol
// says: EAFNOSUPPORT for a family, EPROTONOSUPPORT for a protocol of an
// allowed family. All comparisons are on the full 64-bit register, so a
// family or protocol with stray upper bits (which the kernel would truncate
// to an allowed int) is refused, never allowed.
const (
	ipprotoTCP   = 6  // IPPROTO_TCP
	ipprotoUDP   = 17 // IPPROTO_UDP
	netlinkRoute = 0  // NETLINK_ROUTE
)

var protocolNames = map[uint64]string{0: "0 (the family's default; NETLINK_ROUTE for AF_NETLINK)", ipprotoTCP: "6 (IPPROTO_TCP)", ipprotoUDP: "17 (IPPROTO_UDP)"}

// socketFamilies lists the allowed families with their allowed protocols
// (argument 2); nil means any protocol.
var socketFamilies = []struct {
	name      string
	family    uint64
	protocols []uint64
}{
	{"AF_UNIX", unix.AF_UNIX, nil},
	{"AF_INET", unix.AF_INET, []uint64{0, ipprotoTCP, ipprotoUDP}},
	{"AF_INET6", unix.AF_INET6, []uint64{0, ipprotoTCP, ipprotoUDP}},
	{"AF_NETLINK", unix.AF_NETLINK, []uint64{netlinkRoute}},
}

// withoutDockerSocketRules removes Docker's socket rules (one allow rule
// per family, checked to be exactly that) and socketpair from Docker's
// unconditional allow list.
func withoutDockerSocketRules(in []*mobyseccomp.Syscall) ([]*mobyseccomp.Syscall, error) {
	var out []*mobyseccomp.Syscall
	found := false
	for _, s := range in {
		switch {
		case slices.Contains(s.Names, "socket"):
			if len(s.Names) != 1 || s.Action != specs.ActAllow || len(s.Args) != 1 || s.Args[0].Index != 0 {
				return nil, fmt.Errorf("unexpected socket rule in the base profile: %+v", s.LinuxSyscall)
			}
			found = true
			continue
		case slices.Contains(s.Names, "socketpair"):
			if len(s.Args) != 0 || s.Action != specs.ActAllow {
				return nil, fmt.Errorf("unexpected socketpair rule in the base profile: %+v", s.LinuxSyscall)
			}
			c := *s
			c.Names = slices.DeleteFunc(slices.Clone(s.Names), func(n string) bool { return n == "socketpair" })
			if len(c.Names) > 0 {
				out = append(out, &c)
			}
			continue
		}
		out = append(out, s)
	}
	if !found {
		return nil, errors.New("no socket rule in the base profile")
	}
	return out, nil
}

// socketRules returns the rules of syscall name (socket or socketpair,
// which take family and protocol as arguments 0 and 2): the allow rules of
// socketFamilies, EPROTONOSUPPORT for the other protocols of an allowed
// family and EAFNOSUPPORT for every other family. The rules are disjoint,
// so their order does not matter to libseccomp.
func socketRules(name string) []*mobyseccomp.Syscall {
	rule := func(action specs.LinuxSeccompAction, errno *uint, comment string, args ...specs.LinuxSeccompArg) *mobyseccomp.Syscall {
		return &mobyseccomp.Syscall{
			LinuxSyscall: specs.LinuxSyscall{Names: []string{name}, Action: action, ErrnoRet: errno, Args: args},
			Comment:      comment,
		}
	}
	var out []*mobyseccomp.Syscall
	var families []interval
	for _, f := range socketFamilies {
		fam := specs.LinuxSeccompArg{Index: 0, Value: f.family, Op: specs.OpEqualTo}
		families = append(families, interval{f.family, f.family})
		if f.protocols == nil {
			out = append(out, rule(specs.ActAllow, nil, fmt.Sprintf("sandboxd: %s, %s", name, f.name), fam))
			continue
		}
		var protos []interval
		for _, p := range f.protocols {
			protos = append(protos, interval{p, p})
			out = append(out, rule(specs.ActAllow, nil, fmt.Sprintf("sandboxd: %s, %s, protocol %s", name, f.name, protocolNames[p]),
				fam, specs.LinuxSeccompArg{Index: 2, Value: p, Op: specs.OpEqualTo}))
		}
		for _, gap := range complement(protos) {
			for _, arg := range coverInterval(gap, 2) {
				out = append(out, rule(specs.ActErrno, &eprotonosupport,
					fmt.Sprintf("sandboxd: %s, %s, protocol in %s: EPROTONOSUPPORT, as a kernel without it (no module autoload)", name, f.name, describe(arg)),
					fam, arg))
			}
		}
	}
	for _, gap := range complement(families) {
		for _, arg := range coverInterval(gap, 0) {
			out = append(out, rule(specs.ActErrno, &eafnosupport,
				fmt.Sprintf("sandboxd: %s, family in %s: EAFNOSUPPORT, as a kernel without it (no module autoload)", name, describe(arg)), arg))
		}
	}
	return out
}
