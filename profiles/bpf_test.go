package profiles

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	libseccomp "github.com/seccomp/libseccomp-golang"
	"golang.org/x/sys/unix"
)

// A classic BPF interpreter for seccomp programs, so that the compiled
// filters can be checked exhaustively without installing them.

type sockFilter struct {
	code   uint16
	jt, jf uint8
	k      uint32
}

func decodeProg(t testing.TB, prog []byte) []sockFilter {
	t.Helper()
	if len(prog)%8 != 0 {
		t.Fatalf("program length %d is not a multiple of 8", len(prog))
	}
	out := make([]sockFilter, len(prog)/8)
	for i := range out {
		b := prog[i*8:]
		out[i] = sockFilter{
			code: binary.NativeEndian.Uint16(b[0:]),
			jt:   b[2], jf: b[3],
			k: binary.NativeEndian.Uint32(b[4:]),
		}
	}
	return out
}

// seccompData is struct seccomp_data.
type seccompData struct {
	nr   int32
	arch uint32
	ip   uint64
	args [6]uint64
}

func (d seccompData) bytes() []byte {
	b := make([]byte, 64)
	binary.NativeEndian.PutUint32(b[0:], uint32(d.nr))
	binary.NativeEndian.PutUint32(b[4:], d.arch)
	binary.NativeEndian.PutUint64(b[8:], d.ip)
	for i, a := range d.args {
		binary.NativeEndian.PutUint64(b[16+8*i:], a)
	}
	return b
}

func runBPF(t testing.TB, prog []sockFilter, d seccompData) uint32 {
	t.Helper()
	data := d.bytes()
	var a, x uint32
	var mem [16]uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.code & 0x07 {
		case 0x00: // LD
			switch in.code {
			case 0x20: // W ABS
				if int(in.k)+4 > len(data) || in.k%4 != 0 {
					t.Fatalf("pc %d: load out of seccomp_data: %d", pc, in.k)
				}
				a = binary.NativeEndian.Uint32(data[in.k:])
			case 0x00: // IMM
				a = in.k
			case 0x60: // MEM
				a = mem[in.k]
			default:
				t.Fatalf("pc %d: unsupported LD %#x", pc, in.code)
			}
		case 0x01: // LDX
			switch in.code {
			case 0x01:
				x = in.k
			case 0x61:
				x = mem[in.k]
			default:
				t.Fatalf("pc %d: unsupported LDX %#x", pc, in.code)
			}
		case 0x02: // ST
			mem[in.k] = a
		case 0x03: // STX
			mem[in.k] = x
		case 0x04: // ALU
			src := in.k
			if in.code&0x08 != 0 {
				src = x
			}
			switch in.code & 0xf0 {
			case 0x00:
				a += src
			case 0x10:
				a -= src
			case 0x20:
				a *= src
			case 0x30:
				a /= src
			case 0x40:
				a |= src
			case 0x50:
				a &= src
			case 0x60:
				a <<= src
			case 0x70:
				a >>= src
			case 0x80:
				a = -a
			case 0xa0:
				a ^= src
			default:
				t.Fatalf("pc %d: unsupported ALU %#x", pc, in.code)
			}
		case 0x05: // JMP
			src := in.k
			if in.code&0x08 != 0 {
				src = x
			}
			var cond bool
			switch in.code & 0xf0 {
			case 0x00: // JA
				pc += int(in.k)
				continue
			case 0x10:
				cond = a == src
			case 0x20:
				cond = a > src
			case 0x30:
				cond = a >= src
			case 0x40:
				cond = a&src != 0
			default:
				t.Fatalf("pc %d: unsupported JMP %#x", pc, in.code)
			}
			if cond {
				pc += int(in.jt)
			} else {
				pc += int(in.jf)
			}
		case 0x06: // RET
			switch in.code & 0x18 {
			case 0x00:
				return in.k
			case 0x10:
				return a
			}
			t.Fatalf("pc %d: unsupported RET %#x", pc, in.code)
		case 0x07: // MISC
			if in.code&0xf8 == 0 {
				x = a
			} else {
				a = x
			}
		}
	}
	t.Fatal("fell off the end of the program")
	return 0
}

const (
	retKillThread = 0x00000000
	retAllow      = 0x7fff0000
	retErrno      = 0x00050000

	auditArchX86_64  = 0xc000003e
	auditArchI386    = 0x40000003
	auditArchAARCH64 = 0xc00000b7
	x32SyscallBit    = 0x40000000
)

func errnoRet(e unix.Errno) uint32 { return retErrno | uint32(e) }

func retString(r uint32) string {
	switch {
	case r == retAllow:
		return "ALLOW"
	case r&0xffff0000 == retErrno:
		return fmt.Sprintf("ERRNO(%s)", unix.ErrnoName(unix.Errno(r&0xffff)))
	case r == retKillThread:
		return "KILL_THREAD"
	}
	return fmt.Sprintf("%#x", r)
}

// abi is one syscall ABI the filter handles on this machine.
type abi struct {
	name  string
	audit uint32
	arch  libseccomp.ScmpArch
	nrBit int32
	// argMask: libseccomp compares only the low 32 bits of arguments on
	// 32-bit ABIs (i386, and x32 whose long is 32 bits). personality's and
	// socket's arguments are int-sized, so the kernel sees the same value.
	argMask uint64
}

func nativeABIs(t testing.TB) []abi {
	switch runtime.GOARCH {
	case "amd64":
		return []abi{
			{"x86_64", auditArchX86_64, libseccomp.ArchAMD64, 0, math.MaxUint64},
			{"i386", auditArchI386, libseccomp.ArchX86, 0, math.MaxUint32},
			{"x32", auditArchX86_64, libseccomp.ArchX32, x32SyscallBit, math.MaxUint32},
		}
	case "arm64":
		return []abi{{"aarch64", auditArchAARCH64, libseccomp.ArchARM64, 0, math.MaxUint64}}
	}
	t.Skipf("no ABI table for %s", runtime.GOARCH)
	return nil
}

// nr resolves a syscall for an ABI; ok is false if the ABI has no such
// syscall.
func (a abi) nr(name string) (int32, bool) {
	if a.arch == libseccomp.ArchX86 && name == "socket" {
		// libseccomp 2.5 names i386's socket a multiplexed pseudo
		// syscall; the direct syscall (Linux >= 4.3) is 359.
		return 359, true
	}
	n, err := libseccomp.GetSyscallFromNameByArch(name, a.arch)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

func compiled(t testing.TB, name string) []sockFilter {
	t.Helper()
	p, err := LoadEmbedded(name)
	noErr(t, err)
	prog, err := p.BPF()
	noErr(t, err)
	return decodeProg(t, prog)
}

func TestEmbeddedProfilesCompile(t *testing.T) {
	for _, name := range []string{PayloadName, WorkerName} {
		t.Run(name, func(t *testing.T) {
			p, err := LoadEmbedded(name)
			noErr(t, err)
			prog, err := p.BPF()
			noErr(t, err)
			if len(prog) == 0 || len(prog)%8 != 0 {
				t.Fatalf("BPF length %d: want a non-empty multiple of 8", len(prog))
			}
			t.Logf("%s: %d instructions, skipped deny rules: %v", name, len(prog)/8, p.Skipped)
			// Compiling twice gives the same program.
			again, err := p.BPF()
			noErr(t, err)
			if !slices.Equal(prog, again) {
				t.Error("BPF() is not deterministic")
			}
		})
	}
}

// payloadDenied is the list of syscalls the brief requires to answer EPERM.
var payloadDenied = []string{
	"unshare", "setns",
	"mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
	"ptrace", "process_vm_readv", "process_vm_writev", "bpf", "keyctl", "add_key", "request_key", "perf_event_open",
	"userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register", "kexec_load", "kexec_file_load",
	"init_module", "finit_module", "delete_module", "open_by_handle_at", "name_to_handle_at",
	"chroot", "acct", "swapon", "swapoff", "reboot", "settimeofday", "clock_settime", "adjtimex", "syslog",
	"quotactl", "lookup_dcookie",
}

// payloadAllowed are syscalls python3 and node use all the time.
var payloadAllowed = []string{
	"read", "write", "openat", "close", "mmap", "munmap", "mprotect", "brk", "futex", "clone", "execve", "wait4",
	"epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "rt_sigaction", "rt_sigprocmask", "getrandom",
	"bind", "listen", "accept4", "connect", "sendto", "recvfrom", "pipe2", "eventfd2", "statx",
	"newfstatat", "getdents64", "madvise", "prlimit64", "sched_getaffinity", "rseq", "set_robust_list",
	"sigaltstack", "exit_group", "getpid", "gettid", "uname", "ioctl", "fcntl", "dup3", "memfd_create",
	"arch_prctl", "set_tid_address", "vfork", "pidfd_open",
}

func TestPayloadProgram(t *testing.T) {
	prog := compiled(t, PayloadName)
	eperm, enosys := errnoRet(unix.EPERM), errnoRet(unix.ENOSYS)
	for i, a := range nativeABIs(t) {
		t.Run(a.name, func(t *testing.T) {
			check := func(what string, d seccompData, want uint32) {
				t.Helper()
				d.arch = a.audit
				if got := runBPF(t, prog, d); got != want {
					t.Errorf("%s: %s, want %s", what, retString(got), retString(want))
				}
			}
			if i > 0 {
				// The payload profile has no sub-architectures: every
				// 32-bit syscall (i386, x32) is killed, allowed or not
				// on the native ABI.
				for _, name := range append(append([]string{}, payloadAllowed...), payloadDenied...) {
					if nr, ok := a.nr(name); ok {
						check(name, seccompData{nr: nr | a.nrBit}, retKillThread)
					}
				}
				return
			}
			for _, name := range payloadDenied {
				if nr, ok := a.nr(name); ok {
					check(name, seccompData{nr: nr}, eperm)
				}
			}
			for _, name := range payloadAllowed {
				nr, ok := a.nr(name)
				if !ok || (a.name == "i386" && slices.Contains([]string{"arch_prctl", "clone"}, name)) {
					continue
				}
				check(name, seccompData{nr: nr}, retAllow)
			}
			// clone: allowed without namespace flags, EPERM with any.
			if nr, ok := a.nr("clone"); ok {
				threadFlags := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND | unix.CLONE_THREAD |
					unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID)
				check("clone(thread)", seccompData{nr: nr, args: [6]uint64{threadFlags}}, retAllow)
				check("clone(fork)", seccompData{nr: nr, args: [6]uint64{uint64(unix.SIGCHLD)}}, retAllow)
				for _, f := range []uint64{unix.CLONE_NEWNS, unix.CLONE_NEWUTS, unix.CLONE_NEWIPC, unix.CLONE_NEWUSER,
					unix.CLONE_NEWPID, unix.CLONE_NEWNET, unix.CLONE_NEWCGROUP} {
					check(fmt.Sprintf("clone(%#x)", f), seccompData{nr: nr, args: [6]uint64{f | uint64(unix.SIGCHLD)}}, eperm)
					check(fmt.Sprintf("clone(thread|%#x)", f), seccompData{nr: nr, args: [6]uint64{f | threadFlags}}, eperm)
				}
			}
			if nr, ok := a.nr("clone3"); ok {
				check("clone3", seccompData{nr: nr}, enosys)
			}
			// Unknown to the profile: ENOSYS.
			check("unassigned syscall", seccompData{nr: unassignedSyscall | a.nrBit}, enosys)
			for _, name := range []string{"ustat", "sysfs", "move_pages", "migrate_pages", "nfsservctl"} {
				if nr, ok := a.nr(name); ok {
					check(name, seccompData{nr: nr}, enosys)
				}
			}
			// socket and socketpair: AF_UNIX; AF_INET and AF_INET6 with
			// protocol 0, TCP or UDP; AF_NETLINK with NETLINK_ROUTE only.
			// Other protocols of those: EPROTONOSUPPORT; every other
			// family: EAFNOSUPPORT, on the full 64-bit register.
			for _, name := range []string{"socket", "socketpair"} {
				nr, ok := a.nr(name)
				if !ok {
					continue
				}
				for _, dom := range socketValues() {
					for _, proto := range socketValues() {
						want := wantSocket(dom, proto)
						check(fmt.Sprintf("%s(%#x, _, %#x)", name, dom, proto), seccompData{nr: nr, args: [6]uint64{dom, unix.SOCK_STREAM, proto}}, want)
					}
				}
			}
			if nr, ok := a.nr("socketcall"); ok {
				check("socketcall", seccompData{nr: nr}, eperm)
			}
			// personality: exactly Docker's values, EPERM otherwise.
			if nr, ok := a.nr("personality"); ok {
				for _, v := range personalityValues() {
					want := eperm
					if a.argMask != math.MaxUint64 {
						v &= a.argMask // the kernel never passes more on this ABI
					}
					if slices.Contains(dockerPersonalities, v) {
						want = retAllow
					}
					check(fmt.Sprintf("personality(%#x)", v), seccompData{nr: nr, args: [6]uint64{v}}, want)
				}
			}
		})
	}
	// A foreign architecture is killed (libseccomp's bad-arch action).
	if runtime.GOARCH == "amd64" {
		if got := runBPF(t, prog, seccompData{arch: auditArchAARCH64, nr: 0}); got != retKillThread {
			t.Errorf("foreign arch: %s, want KILL", retString(got))
		}
	}
}

// dockerPersonalities restates Docker's personality allow-list
// (moby/profiles/seccomp v0.3.0) independently of the generator.
var dockerPersonalities = []uint64{0, 0x8, 0x20000, 0x20008, 0xffffffff}

// wantSocket restates the payload's socket rules independently of the
// generator (profiles/internal/gen socketFamilies).
func wantSocket(family, protocol uint64) uint32 {
	switch family {
	case unix.AF_UNIX:
		return retAllow
	case unix.AF_INET, unix.AF_INET6:
		if protocol == 0 || protocol == unix.IPPROTO_TCP || protocol == unix.IPPROTO_UDP {
			return retAllow
		}
		return errnoRet(unix.EPROTONOSUPPORT)
	case unix.AF_NETLINK:
		if protocol == unix.NETLINK_ROUTE {
			return retAllow
		}
		return errnoRet(unix.EPROTONOSUPPORT)
	}
	return errnoRet(unix.EAFNOSUPPORT)
}

// socketValues are every family number up to past AF_MAX, protocol numbers
// that autoload modules (SCTP 132, L2TP 115, MPTCP 262, DCCP 33, SMC 256),
// and values whose low 32 bits are an allowed one.
func socketValues() []uint64 {
	var vs []uint64
	for v := range uint64(70) {
		vs = append(vs, v)
	}
	vs = append(vs, 115, 132, 255, 256, 262, 0xffffffff, 1<<32, 1<<32|1, 1<<32|2, 1<<32|6, 1<<32|10, 1<<32|16, 1<<32|17,
		1<<63|1, math.MaxUint64, math.MaxUint64-1)
	return vs
}

// personalityValues returns the allowed values, their neighbours, every
// power of two and its neighbours, and random values.
func personalityValues() []uint64 {
	var vs []uint64
	for _, v := range dockerPersonalities {
		vs = append(vs, v, v-1, v+1)
	}
	for i := range 64 {
		p := uint64(1) << i
		vs = append(vs, p, p-1, p+1, p|0x8, p|0x20000)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		vs = append(vs, r.Uint64(), uint64(r.Uint32()), r.Uint64N(0x40000))
	}
	vs = append(vs, math.MaxUint64, 0x100000000, 0x1ffffffff, 0x100000008, 0x0400000)
	return vs
}

func TestWorkerProgram(t *testing.T) {
	prog := compiled(t, WorkerName)
	eperm, enosys := errnoRet(unix.EPERM), errnoRet(unix.ENOSYS)
	a := nativeABIs(t)[0]
	check := func(what string, d seccompData, want uint32) {
		t.Helper()
		d.arch = a.audit
		if got := runBPF(t, prog, d); got != want {
			t.Errorf("%s: %s, want %s", what, retString(got), retString(want))
		}
	}
	for _, name := range []string{"mount", "umount2", "pivot_root", "unshare", "setns"} {
		nr, _ := a.nr(name)
		check(name, seccompData{nr: nr}, retAllow)
	}
	nr, _ := a.nr("clone")
	check("clone(all namespaces)", seccompData{nr: nr, args: [6]uint64{unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP | uint64(unix.SIGCHLD)}}, retAllow)
	nr, _ = a.nr("clone3")
	check("clone3", seccompData{nr: nr}, enosys)
	// Still denied, as in Docker's profile without CAP_SYS_ADMIN.
	for _, name := range []string{"bpf", "keyctl", "perf_event_open", "fsopen", "open_tree", "move_mount",
		"kexec_load", "init_module", "io_uring_setup", "userfaultfd", "chroot"} {
		if nr, ok := a.nr(name); ok {
			check(name, seccompData{nr: nr}, eperm)
		}
	}
	check("unassigned syscall", seccompData{nr: unassignedSyscall}, eperm)
}
