package profiles

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	mobyseccomp "github.com/moby/profiles/seccomp"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// Names of the embedded profiles.
const (
	// PayloadName is the profile bubblewrap applies to the sandboxed payload.
	PayloadName = "payload.json"
	// WorkerName is the Kubernetes Localhost profile for the supervisor's
	// container.
	WorkerName = "kubernetes-worker.json"
)

// MaxProfileSize bounds what Load reads. Docker's default profile is about
// 20 KiB; anything near this limit is not a profile.
const MaxProfileSize = 1 << 20

//go:embed payload.json kubernetes-worker.json
var embedded embed.FS

// Embedded returns a copy of the raw bytes of an embedded profile, so that an
// installer can write it out (for example into the kubelet's seccomp
// directory). name is PayloadName or WorkerName.
func Embedded(name string) ([]byte, error) {
	switch name {
	case PayloadName, WorkerName:
	default:
		return nil, fmt.Errorf("profiles: no embedded profile %q (have %q, %q)", name, PayloadName, WorkerName)
	}
	b, err := embedded.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("profiles: embedded %s: %w", name, err)
	}
	return b, nil
}

// LoadEmbedded parses an embedded profile (see Embedded).
func LoadEmbedded(name string) (*Profile, error) {
	raw, err := Embedded(name)
	if err != nil {
		return nil, err
	}
	return Parse(raw, name)
}

// Profile is a parsed, validated seccomp profile, resolved for the running
// architecture and for a process with no capabilities.
type Profile struct {
	Name    string              // file base name
	SHA256  string              // hex sha256 of the raw JSON bytes as read
	Seccomp *specs.LinuxSeccomp // resolved for this architecture and for a process with no capabilities

	// Skipped lists "syscall(action)" for deny rules that name a syscall
	// this libseccomp cannot resolve, so that callers can audit them. Such a
	// syscall gets the profile's default action, which Parse has checked
	// denies as well. Allow rules naming unknown syscalls are dropped
	// without a record: that only makes the filter stricter.
	Skipped []string

	plan *plan
}

// Load reads and parses a profile file. The profile's Name is the file's
// base name.
func Load(path string) (*Profile, error) {
	// O_NONBLOCK: a FIFO planted at path must not hang the caller; it is
	// then refused as not a regular file.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("profiles: %s is not a regular file", path)
	}
	raw, err := io.ReadAll(io.LimitReader(f, MaxProfileSize+1))
	if err != nil {
		return nil, fmt.Errorf("profiles: read %s: %w", path, err)
	}
	if len(raw) > MaxProfileSize {
		return nil, fmt.Errorf("profiles: %s is larger than %d bytes", path, MaxProfileSize)
	}
	return Parse(raw, filepath.Base(path))
}

// Parse decodes a profile strictly, validates it, resolves Docker's
// includes/excludes conditions for the running architecture, the running
// kernel and a process with no capabilities, and prepares it for
// compilation. Unknown fields (at any level), duplicate keys, trailing data,
// unknown actions, operators, architectures, capabilities and flags are
// errors, as is anything the compiler could not express exactly.
func Parse(raw []byte, name string) (*Profile, error) {
	sum := sha256.Sum256(raw)
	p := &Profile{Name: name, SHA256: hex.EncodeToString(sum[:])}
	wrap := func(err error) error { return fmt.Errorf("profiles: %s: %w", name, err) }

	if err := checkDuplicateKeys(raw); err != nil {
		return nil, wrap(err)
	}
	var doc mobyseccomp.Seccomp
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, wrap(fmt.Errorf("decode: %w", err))
	}
	if err := dec.Decode(&struct{}{}); err != io.EOF {
		return nil, wrap(errors.New("trailing data after the profile object"))
	}
	if err := validate(&doc); err != nil {
		return nil, wrap(err)
	}
	kv, err := kernelVersion()
	if err != nil {
		return nil, wrap(err)
	}
	resolved, err := resolve(&doc, nativeArch(), nil, kv)
	if err != nil {
		return nil, wrap(err)
	}
	p.Seccomp = resolved
	pl, skipped, err := buildPlan(resolved)
	if err != nil {
		return nil, wrap(err)
	}
	p.plan = pl
	p.Skipped = skipped
	return p, nil
}

// checkDuplicateKeys walks the JSON token stream and rejects an object that
// names a key twice. encoding/json keeps the last value and matches keys
// case-insensitively, so "action" and "Action" in one rule would silently
// pick one of them; a profile that means two things is refused.
func checkDuplicateKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	type frame struct {
		object bool
		keys   map[string]bool
		expect bool // next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("decode: %w", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		isKey := top != nil && top.object && top.expect
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				if top != nil && top.object {
					top.expect = true
				}
				stack = append(stack, &frame{object: true, keys: map[string]bool{}, expect: true})
			case '[':
				if top != nil && top.object {
					top.expect = true
				}
				stack = append(stack, &frame{})
			case '}', ']':
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			if isKey {
				k := strings.ToLower(t)
				if top.keys[k] {
					return fmt.Errorf("duplicate key %q", t)
				}
				top.keys[k] = true
				top.expect = false
				continue
			}
		}
		if top != nil && top.object {
			top.expect = true
		}
	}
}

// Vocabulary of the format. Anything else is an error.
var (
	knownActions = map[specs.LinuxSeccompAction]bool{
		specs.ActKill: true, specs.ActKillProcess: true, specs.ActKillThread: true,
		specs.ActTrap: true, specs.ActErrno: true, specs.ActTrace: true,
		specs.ActAllow: true, specs.ActLog: true, specs.ActNotify: true,
	}
	knownOps = map[specs.LinuxSeccompOperator]bool{
		specs.OpNotEqual: true, specs.OpLessThan: true, specs.OpLessEqual: true,
		specs.OpEqualTo: true, specs.OpGreaterEqual: true, specs.OpGreaterThan: true,
		specs.OpMaskedEqual: true,
	}
	// specArchToLibseccomp maps the runtime-spec architecture tokens to the
	// names libseccomp-golang's GetArchFromString accepts.
	specArchToLibseccomp = map[specs.Arch]string{
		specs.ArchX86: "x86", specs.ArchX86_64: "amd64", specs.ArchX32: "x32",
		specs.ArchARM: "arm", specs.ArchAARCH64: "arm64",
		specs.ArchMIPS: "mips", specs.ArchMIPS64: "mips64", specs.ArchMIPS64N32: "mips64n32",
		specs.ArchMIPSEL: "mipsel", specs.ArchMIPSEL64: "mipsel64", specs.ArchMIPSEL64N32: "mipsel64n32",
		specs.ArchPPC: "ppc", specs.ArchPPC64: "ppc64", specs.ArchPPC64LE: "ppc64le",
		specs.ArchS390: "s390", specs.ArchS390X: "s390x",
		specs.ArchPARISC: "parisc", specs.ArchPARISC64: "parisc64",
		specs.ArchRISCV64: "riscv64", specs.ArchLOONGARCH64: "loong64",
		specs.ArchM68K: "m68k", specs.ArchSH: "sh", specs.ArchSHEB: "sheb",
	}
	// filterArches are the spellings Docker's includes/excludes "arches"
	// use: libseccomp's native names as Docker maps them from GOARCH (see
	// goToNative in github.com/moby/profiles/seccomp), plus "x32", which
	// Docker's default profile names although no GOARCH maps to it, and
	// both "mipsel64n32" and Docker's misspelling "mips3l64n32".
	filterArches = map[string]bool{
		"x86": true, "amd64": true, "x32": true, "arm": true, "arm64": true,
		"loongarch64": true, "mips": true, "mipsel": true, "mips64": true,
		"mips64n32": true, "mipsel64": true, "mipsel64n32": true,
		"mips3l64n32": true, "ppc": true, "ppc64": true, "ppc64le": true,
		"riscv64": true, "s390": true, "s390x": true, "parisc": true,
		"parisc64": true, "m68k": true, "sh": true, "sheb": true,
	}
	// goToNative is Docker's GOARCH -> filter-arch mapping.
	goToNative = map[string]string{
		"386": "x86", "amd64": "amd64", "arm": "arm", "arm64": "arm64",
		"loong64": "loongarch64", "mips64": "mips64", "mips64p32": "mips64n32",
		"mips64le": "mipsel64", "mips64p32le": "mips3l64n32", "mipsle": "mipsel",
		"ppc": "ppc", "ppc64": "ppc64", "ppc64le": "ppc64le", "riscv64": "riscv64",
		"s390": "s390", "s390x": "s390x",
	}
	// nativeToSpec is Docker's filter-arch -> runtime-spec mapping used to
	// pick the archMap entry for this machine.
	nativeToSpec = map[string]specs.Arch{
		"x86": specs.ArchX86, "amd64": specs.ArchX86_64, "arm": specs.ArchARM,
		"arm64": specs.ArchAARCH64, "loongarch64": specs.ArchLOONGARCH64,
		"mips64": specs.ArchMIPS64, "mips64n32": specs.ArchMIPS64N32,
		"mipsel64": specs.ArchMIPSEL64, "mips3l64n32": specs.ArchMIPSEL64N32,
		"mipsel": specs.ArchMIPSEL, "ppc": specs.ArchPPC, "ppc64": specs.ArchPPC64,
		"ppc64le": specs.ArchPPC64LE, "riscv64": specs.ArchRISCV64,
		"s390": specs.ArchS390, "s390x": specs.ArchS390X,
	}
	knownFlags = map[specs.LinuxSeccompFlag]bool{
		"SECCOMP_FILTER_FLAG_TSYNC":     true, // libseccomp-golang always sets it
		specs.LinuxSeccompFlagLog:       true,
		specs.LinuxSeccompFlagSpecAllow: true,
	}
	// knownCaps are the Linux capability names (capability.h, up to
	// CAP_CHECKPOINT_RESTORE).
	knownCaps = func() map[string]bool {
		m := map[string]bool{}
		for _, c := range []string{
			"CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL",
			"SETGID", "SETUID", "SETPCAP", "LINUX_IMMUTABLE", "NET_BIND_SERVICE",
			"NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
			"SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT",
			"SYS_ADMIN", "SYS_BOOT", "SYS_NICE", "SYS_RESOURCE", "SYS_TIME",
			"SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL",
			"SETFCAP", "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM",
			"BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF", "CHECKPOINT_RESTORE",
		} {
			m["CAP_"+c] = true
		}
		return m
	}()
)

// isKnownArch reports whether a is a runtime-spec architecture token.
func isKnownArch(a specs.Arch) bool { _, ok := specArchToLibseccomp[a]; return ok }

func validAction(a specs.LinuxSeccompAction, errnoRet *uint, what string) error {
	if !knownActions[a] {
		return fmt.Errorf("%s: unknown action %q", what, a)
	}
	if a == specs.ActNotify {
		// A notify filter needs a listener (an agent answering the
		// notifications). We have none; compiling it as anything else would
		// change what the profile means.
		return fmt.Errorf("%s: %s is not supported (no seccomp agent)", what, a)
	}
	if errnoRet != nil {
		switch a {
		case specs.ActErrno:
			if *errnoRet > 4095 {
				return fmt.Errorf("%s: errno %d out of range (max 4095)", what, *errnoRet)
			}
		case specs.ActTrace:
			if *errnoRet > 0xffff {
				return fmt.Errorf("%s: trace message %d out of range", what, *errnoRet)
			}
		default:
			return fmt.Errorf("%s: errnoRet is only valid with %s or %s, not %s", what, specs.ActErrno, specs.ActTrace, a)
		}
	}
	return nil
}

func validFilter(f *mobyseccomp.Filter, what string) error {
	if f == nil {
		return nil
	}
	for _, a := range f.Arches {
		if !filterArches[a] {
			return fmt.Errorf("%s: unknown arch %q", what, a)
		}
	}
	for _, c := range f.Caps {
		if !knownCaps[c] {
			return fmt.Errorf("%s: unknown capability %q", what, c)
		}
	}
	return nil
}

// validate checks the whole document, including rules that resolution would
// drop on this machine: a typo in an s390 rule is still a typo.
func validate(doc *mobyseccomp.Seccomp) error {
	if doc.DefaultAction == "" {
		// Docker treats a profile without defaultAction and syscalls as
		// "seccomp disabled". We never run unconfined because of a file.
		return errors.New("defaultAction is required")
	}
	if err := validAction(doc.DefaultAction, doc.DefaultErrnoRet, "defaultAction"); err != nil {
		return err
	}
	if doc.ListenerPath != "" || doc.ListenerMetadata != "" {
		return errors.New("listenerPath/listenerMetadata are not supported (no seccomp agent)")
	}
	for _, fl := range doc.Flags {
		if !knownFlags[fl] {
			return fmt.Errorf("unsupported flag %q", fl)
		}
	}
	if len(doc.Architectures) != 0 && len(doc.ArchMap) != 0 {
		return errors.New("both architectures and archMap are specified, use one")
	}
	for _, a := range doc.Architectures {
		if !isKnownArch(a) {
			return fmt.Errorf("architectures: unknown arch %q", a)
		}
	}
	for _, m := range doc.ArchMap {
		if !isKnownArch(m.Arch) {
			return fmt.Errorf("archMap: unknown arch %q", m.Arch)
		}
		for _, s := range m.SubArches {
			if !isKnownArch(s) {
				return fmt.Errorf("archMap %s: unknown sub-architecture %q", m.Arch, s)
			}
		}
	}
	if len(doc.LinuxSeccomp.Syscalls) != 0 {
		return errors.New("internal: LinuxSeccomp.Syscalls must be empty")
	}
	for i, call := range doc.Syscalls {
		what := fmt.Sprintf("syscalls[%d]", i)
		if call == nil {
			return fmt.Errorf("%s: null rule", what)
		}
		if call.Name != "" && len(call.Names) != 0 {
			return fmt.Errorf("%s: both name and names are specified, use one", what)
		}
		names := call.Names
		if call.Name != "" {
			names = []string{call.Name}
		}
		if len(names) == 0 {
			return fmt.Errorf("%s: no syscall names", what)
		}
		for _, n := range names {
			if n == "" || strings.TrimSpace(n) != n {
				return fmt.Errorf("%s: invalid syscall name %q", what, n)
			}
		}
		what = fmt.Sprintf("%s (%s)", what, strings.Join(names, ","))
		if call.Action == "" {
			return fmt.Errorf("%s: action is required", what)
		}
		if err := validAction(call.Action, call.ErrnoRet, what); err != nil {
			return err
		}
		for j, arg := range call.Args {
			if arg.Index > 5 {
				return fmt.Errorf("%s: args[%d]: index %d out of range (0-5)", what, j, arg.Index)
			}
			if !knownOps[arg.Op] {
				return fmt.Errorf("%s: args[%d]: unknown op %q", what, j, arg.Op)
			}
			if arg.Op != specs.OpMaskedEqual && arg.ValueTwo != 0 {
				// libseccomp ignores the second operand of every other
				// comparison; a rule that sets it means something we
				// would not enforce.
				return fmt.Errorf("%s: args[%d]: valueTwo is only meaningful with %s", what, j, specs.OpMaskedEqual)
			}
		}
		if err := validFilter(call.Includes, what+": includes"); err != nil {
			return err
		}
		if err := validFilter(call.Excludes, what+": excludes"); err != nil {
			return err
		}
	}
	return nil
}

func nativeArch() string { return goToNative[runtime.GOARCH] }

// kernelVersion is the running kernel's "<kernel>.<major>", parsed as Docker
// does. A variable so that tests can pin it.
var kernelVersion = sync.OnceValues(func() (mobyseccomp.KernelVersion, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return mobyseccomp.KernelVersion{}, fmt.Errorf("uname: %w", err)
	}
	return parseKernelRelease(unix.ByteSliceToString(uts.Release[:]))
})

func parseKernelRelease(release string) (mobyseccomp.KernelVersion, error) {
	var v mobyseccomp.KernelVersion
	if _, err := fmt.Sscanf(release, "%d.%d", &v.Kernel, &v.Major); err != nil {
		return v, fmt.Errorf("parse kernel release %q: %w", release, err)
	}
	return v, nil
}

func kernelAtLeast(have, want mobyseccomp.KernelVersion) bool {
	return have.Kernel > want.Kernel || (have.Kernel == want.Kernel && have.Major >= want.Major)
}

// resolve applies Docker's includes/excludes semantics (setupSeccomp in
// github.com/moby/profiles/seccomp) for one architecture, one capability
// set and one kernel version, and returns the plain runtime-spec profile.
// It does not modify doc.
//
//   - excludes: the rule is dropped if the arch is listed, if ANY listed
//     capability is held, or if the kernel is at least minKernel.
//   - includes: the rule is kept only if the arch is listed, ALL listed
//     capabilities are held, and the kernel is at least minKernel.
//   - archMap: the entry whose architecture is the native one contributes
//     itself and its sub-architectures; "architectures" is taken as is.
//
// Docker checks capabilities against the container's bounding set; sandboxd
// resolves with caps == nil, a process with no capabilities at all.
func resolve(doc *mobyseccomp.Seccomp, arch string, caps []string, kv mobyseccomp.KernelVersion) (*specs.LinuxSeccomp, error) {
	out := &specs.LinuxSeccomp{
		DefaultAction:    doc.DefaultAction,
		DefaultErrnoRet:  cloneUint(doc.DefaultErrnoRet),
		Architectures:    slices.Clone(doc.Architectures),
		Flags:            slices.Clone(doc.Flags),
		ListenerPath:     doc.ListenerPath,
		ListenerMetadata: doc.ListenerMetadata,
	}
	if len(doc.ArchMap) != 0 {
		if want, ok := nativeToSpec[arch]; ok {
			for _, m := range doc.ArchMap {
				if m.Arch == want {
					out.Architectures = append(out.Architectures, m.Arch)
					out.Architectures = append(out.Architectures, m.SubArches...)
					break
				}
			}
		}
	}
	for _, call := range doc.Syscalls {
		if call.Excludes != nil {
			if slices.Contains(call.Excludes.Arches, arch) {
				continue
			}
			if slices.ContainsFunc(call.Excludes.Caps, func(c string) bool { return slices.Contains(caps, c) }) {
				continue
			}
			if call.Excludes.MinKernel != nil && kernelAtLeast(kv, *call.Excludes.MinKernel) {
				continue
			}
		}
		if call.Includes != nil {
			if len(call.Includes.Arches) > 0 && !slices.Contains(call.Includes.Arches, arch) {
				continue
			}
			if !allIn(call.Includes.Caps, caps) {
				continue
			}
			if call.Includes.MinKernel != nil && !kernelAtLeast(kv, *call.Includes.MinKernel) {
				continue
			}
		}
		names := slices.Clone(call.Names)
		if call.Name != "" {
			names = []string{call.Name}
		}
		out.Syscalls = append(out.Syscalls, specs.LinuxSyscall{
			Names:    names,
			Action:   call.Action,
			ErrnoRet: cloneUint(call.ErrnoRet),
			Args:     slices.Clone(call.Args),
		})
	}
	return out, nil
}

func allIn(want, have []string) bool {
	for _, c := range want {
		if !slices.Contains(have, c) {
			return false
		}
	}
	return true
}

func cloneUint(p *uint) *uint {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
