package nsinit

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/internal/testutil"
	"github.com/sandboxd/sandboxd/nsinit/config"
	"github.com/sandboxd/sandboxd/nsinit/spec"
)

func readAllFD(t *testing.T, fd int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 64<<10)
	for {
		n, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatalf("read fd %d: %v", fd, err)
		}
		if n == 0 {
			return out
		}
		out = append(out, buf[:n]...)
	}
}

func TestSealedMemfd(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"env", []byte("HOME=/workspace\x00PATH=/usr/bin\x00")},
		{"empty", nil},
		{"one byte", []byte{0}},
		{"larger than one write chunk", bytes.Repeat([]byte("0123456789abcdef"), 1<<16)}, // 1 MiB
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := sealedMemfd("sandboxd-test", tc.data)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(fd)

			// Positioned at 0: a reader gets everything.
			if got := readAllFD(t, fd); !bytes.Equal(got, tc.data) {
				t.Fatalf("read back %d bytes, want %d", len(got), len(tc.data))
			}
			// Inheritable: bwrap gets it by number across execve.
			flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
			if err != nil {
				t.Fatal(err)
			}
			if flags&unix.FD_CLOEXEC != 0 {
				t.Fatal("memfd is close-on-exec; bwrap would not inherit it")
			}
			// Sealed against any change, and against removing the seals.
			seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
			if err != nil {
				t.Fatal(err)
			}
			want := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
			if seals&want != want {
				t.Fatalf("seals %#x, want %#x set", seals, want)
			}
			if _, err := unix.Pwrite(fd, []byte("x"), 0); !errors.Is(err, unix.EPERM) {
				t.Fatalf("write to the sealed memfd: err = %v, want EPERM", err)
			}
			if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
				t.Fatal(err)
			}
			if _, err := unix.Write(fd, []byte("x")); !errors.Is(err, unix.EPERM) {
				t.Fatalf("append to the sealed memfd: err = %v, want EPERM", err)
			}
			if len(tc.data) > 0 {
				if err := unix.Ftruncate(fd, 0); !errors.Is(err, unix.EPERM) {
					t.Fatalf("truncate the sealed memfd: err = %v, want EPERM", err)
				}
			}
			if err := unix.Ftruncate(fd, int64(len(tc.data))+4096); !errors.Is(err, unix.EPERM) {
				t.Fatalf("grow the sealed memfd: err = %v, want EPERM", err)
			}
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE); !errors.Is(err, unix.EPERM) {
				t.Fatalf("add a seal after F_SEAL_SEAL: err = %v, want EPERM", err)
			}
			// A writable mapping is refused too.
			if len(tc.data) > 0 {
				if _, err := unix.Mmap(fd, 0, len(tc.data), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EPERM) {
					t.Fatalf("shared writable mmap: err = %v, want EPERM", err)
				}
			}
			// Reopening through /proc gives the same, read-only content.
			f, err := os.Open(filepath.Join("/proc/self/fd", strconv.Itoa(fd)))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if got, _ := io.ReadAll(f); !bytes.Equal(got, tc.data) {
				t.Fatal("content differs through /proc/self/fd")
			}
		})
	}
}

func TestMountsDigest(t *testing.T) {
	base := testConfig()
	const tmp = 256 << 20
	d0 := MountsDigest(base, tmp)
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(d0) {
		t.Fatalf("digest %q is not a sha256 hex", d0)
	}
	if MountsDigest(testConfig(), tmp) != d0 {
		t.Fatal("digest of an equal config differs")
	}

	changes := []struct {
		name   string
		mutate func(c *config.Config)
		tmp    int64
	}{
		{"ro bind added", func(c *config.Config) { c.ROBinds = append(c.ROBinds, "/opt") }, tmp},
		{"ro bind removed", func(c *config.Config) { c.ROBinds = c.ROBinds[1:] }, tmp},
		{"ro bind changed", func(c *config.Config) { c.ROBinds[0] = "/usr/local" }, tmp},
		{"ro binds reordered", func(c *config.Config) { c.ROBinds[0], c.ROBinds[1] = c.ROBinds[1], c.ROBinds[0] }, tmp},
		{"device added", func(c *config.Config) { c.Devices = append(c.Devices, "/dev/tty") }, tmp},
		{"device changed", func(c *config.Config) { c.Devices[0] = "/dev/kmsg" }, tmp},
		{"symlink target changed", func(c *config.Config) { c.Symlinks[0].Target = "usr/local/bin" }, tmp},
		{"symlink removed", func(c *config.Config) { c.Symlinks = nil }, tmp},
		{"shim changed", func(c *config.Config) { c.Shim = "/opt/exec" }, tmp},
		{"tmp size changed", func(c *config.Config) {}, tmp + 1},
		// A bind moved between lists is a different view.
		{"bind moved to devices", func(c *config.Config) {
			c.Devices = append(c.Devices, c.ROBinds[len(c.ROBinds)-1])
			c.ROBinds = c.ROBinds[:len(c.ROBinds)-1]
		}, tmp},
	}
	seen := map[string]string{d0: "base"}
	for _, tc := range changes {
		c := testConfig()
		tc.mutate(c)
		d := MountsDigest(c, tc.tmp)
		if prev, dup := seen[d]; dup {
			t.Errorf("%s: digest equals that of %s", tc.name, prev)
		}
		seen[d] = tc.name
	}

	// Settings that do not change what the payload sees leave it alone.
	stable := []struct {
		name   string
		mutate func(c *config.Config)
	}{
		{"bwrap path", func(c *config.Config) { c.Bwrap = "/opt/bwrap" }},
		{"base env", func(c *config.Config) { c.BaseEnv = append(c.BaseEnv, "X=1") }},
		{"runtimes", func(c *config.Config) { delete(c.Runtimes, "javascript") }},
		{"rlimit caps", func(c *config.Config) { c.RlimitMax["RLIMIT_NOFILE"] = 1 }},
		{"tmp cap", func(c *config.Config) { c.TmpSizeMaxBytes = 1 }},
		{"payload profile", func(c *config.Config) { c.PayloadProfile = "/etc/other.json" }},
	}
	for _, tc := range stable {
		c := testConfig()
		tc.mutate(c)
		if d := MountsDigest(c, tmp); d != d0 {
			t.Errorf("%s changed the mounts digest", tc.name)
		}
	}
}

// TestMountsDigestObservesMissingSources: bwrap skips a missing
// --ro-bind-try source; the digest must tell that launch apart.
func TestMountsDigestObservesMissingSources(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "opt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := testConfig()
	c.ROBinds = append(c.ROBinds, dir)
	present := MountsDigest(c, 1<<20)
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if MountsDigest(c, 1<<20) == present {
		t.Fatal("a missing --ro-bind-try source leaves the digest unchanged")
	}
}

func TestSHA256Helpers(t *testing.T) {
	// sha256("") and sha256("abc"), FIPS 180-2.
	if got := sha256Hex(nil); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("sha256Hex(nil) = %s", got)
	}
	if got := sha256Hex([]byte("abc")); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("sha256Hex(abc) = %s", got)
	}
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("abc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fileSHA256(p) != sha256Hex([]byte("abc")) {
		t.Error("fileSHA256 differs from sha256Hex of the content")
	}
	if fileSHA256(p+".missing") != "" {
		t.Error("fileSHA256 of a missing file is not empty")
	}
}

func TestFixCapabilitiesNamesHelper(t *testing.T) {
	fix := fixCapabilities("/usr/libexec/sandboxd/sandboxd-nsinit")
	for _, want := range []string{"setcap", FileCaps, "/usr/libexec/sandboxd/sandboxd-nsinit", "sandboxctl doctor"} {
		if !strings.Contains(fix, want) {
			t.Errorf("fix %q lacks %q", fix, want)
		}
	}
	// cap_setuid is a capability; a setuid bit would be a different helper.
	if strings.Contains(fix, "setuid bit") || strings.Contains(fix, "u+s") || strings.Contains(fix, "+ep") {
		t.Errorf("fix %q suggests a setuid bit", fix)
	}
}

func TestSetRlimitUnknown(t *testing.T) {
	if err := setRlimit("RLIMIT_NPROC", 1, 1); err == nil {
		t.Fatal("setRlimit accepted an rlimit outside its table")
	}
	// Every rlimit a spec may carry has a resource number here.
	for name := range spec.AllowedRlimits {
		if _, ok := rlimitResources[name]; !ok {
			t.Errorf("spec allows %s but the helper cannot set it", name)
		}
	}
}

func TestCheckSpec(t *testing.T) {
	rl := func(typ string, soft, hard uint64) []specs.POSIXRlimit {
		return []specs.POSIXRlimit{{Type: typ, Soft: soft, Hard: hard}}
	}
	tests := []struct {
		name      string
		s         spec.LaunchSpec
		wantErr   string
		wantProbe bool
		wantTmp   int64
	}{
		{name: "python", s: spec.LaunchSpec{Runtime: "python", TmpSizeBytes: 1 << 20}, wantTmp: 1 << 20},
		{name: "probe", s: spec.LaunchSpec{Runtime: "probe"}, wantProbe: true, wantTmp: 1 << 30},
		{name: "unknown runtime", s: spec.LaunchSpec{Runtime: "ruby"}, wantErr: `runtime "ruby" is not configured`},
		{name: "tmp zero takes the cap", s: spec.LaunchSpec{Runtime: "python"}, wantTmp: 1 << 30},
		{name: "tmp at the cap", s: spec.LaunchSpec{Runtime: "python", TmpSizeBytes: 1 << 30}, wantTmp: 1 << 30},
		{name: "tmp above the cap", s: spec.LaunchSpec{Runtime: "python", TmpSizeBytes: 1<<30 + 1}, wantErr: "above the helper's cap"},
		{name: "rlimit at the cap", s: spec.LaunchSpec{Runtime: "python", Process: specs.Process{Rlimits: rl("RLIMIT_NOFILE", 4096, 4096)}}, wantTmp: 1 << 30},
		{name: "rlimit above the cap", s: spec.LaunchSpec{Runtime: "python", Process: specs.Process{Rlimits: rl("RLIMIT_NOFILE", 1, 4097)}}, wantErr: "RLIMIT_NOFILE hard 4097"},
		{name: "core is ignored", s: spec.LaunchSpec{Runtime: "python", Process: specs.Process{Rlimits: rl("RLIMIT_CORE", 1<<40, 1<<40)}}, wantTmp: 1 << 30},
		{name: "rlimit without a cap", s: spec.LaunchSpec{Runtime: "python", Process: specs.Process{Rlimits: rl("RLIMIT_NPROC", 1, 1)}}, wantErr: "RLIMIT_NPROC"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s
			l := &launch{cfg: testConfig(), spec: &s}
			err := l.checkSpec()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("checkSpec err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.probe != tc.wantProbe || s.TmpSizeBytes != tc.wantTmp {
				t.Fatalf("probe %v tmp %d, want %v %d", l.probe, s.TmpSizeBytes, tc.wantProbe, tc.wantTmp)
			}
			if tc.wantProbe && l.rt.Argv[0] != ProbeRuntime.Argv[0] {
				t.Fatalf("probe runtime %+v", l.rt)
			}
			if !tc.wantProbe && len(l.rt.Argv) == 0 {
				t.Fatal("runtime not set")
			}
		})
	}
	// "probe" is the helper's own runtime even if the config names one so.
	cfg := testConfig()
	cfg.Runtimes["probe"] = config.Runtime{Argv: []string{"/bin/sh", "-c", "evil"}, CodeFile: "x"}
	l := &launch{cfg: cfg, spec: &spec.LaunchSpec{Runtime: "probe"}}
	if err := l.checkSpec(); err != nil || l.rt.Argv[0] != "/usr/bin/true" {
		t.Fatalf("probe runtime taken from config: %+v, %v", l.rt, err)
	}
}

func TestOpenWorkspace(t *testing.T) {
	root := t.TempDir()
	uid := os.Geteuid()
	if err := os.Mkdir(filepath.Join(root, "ws1"), 0o700); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}

	fd, err := openWorkspace(root, "ws1", uid)
	if err != nil {
		t.Fatalf("openWorkspace: %v", err)
	}
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.FD_CLOEXEC != 0 {
		t.Error("workspace fd is close-on-exec; bwrap --bind-fd needs it")
	}
	target, _ := os.Readlink(filepath.Join("/proc/self/fd", strconv.Itoa(fd)))
	if target != filepath.Join(root, "ws1") {
		t.Errorf("fd points at %q", target)
	}
	unix.Close(fd)

	for _, tc := range []struct {
		name, ws string
		owner    int
		wantErr  string
	}{
		{"symlink to outside", "link", uid, "open workspace"},
		{"dotdot", "..", uid, "open workspace"},
		{"escape", "../" + filepath.Base(outside), uid, "open workspace"},
		{"absolute", outside, uid, "open workspace"},
		{"missing", "nope", uid, "open workspace"},
		{"a file", "file", uid, "open workspace"},
		{"another owner", "ws1", uid + 1, "owned by"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fd, err := openWorkspace(root, tc.ws, tc.owner)
			if err == nil {
				unix.Close(fd)
				t.Fatalf("openWorkspace(%q) accepted", tc.ws)
			}
			if fd != -1 {
				t.Errorf("fd %d returned with an error", fd)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %q, want %q", err, tc.wantErr)
			}
		})
	}
	if _, err := openWorkspace(filepath.Join(root, "missing-root"), "ws1", uid); err == nil {
		t.Fatal("missing root accepted")
	}
}

// TestOpenWorkspaceRoot: the workspace root is refused when it is a symlink
// (even to a good directory) or when its parent is not root-owned or is
// writable by others, so that the supervisor cannot swap it.
func TestOpenWorkspaceRoot(t *testing.T) {
	testutil.RequireRoot(t, "create root-owned files")
	base := t.TempDir() // root-owned 0700 below sticky /tmp
	uid := os.Geteuid()
	parent := filepath.Join(base, "state")
	root := filepath.Join(parent, "workspaces")
	if err := os.MkdirAll(filepath.Join(root, "ws1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := openWorkspace(root, "ws1", uid)
	if err != nil {
		t.Fatalf("good layout refused: %v", err)
	}
	unix.Close(fd)

	// A symlink in place of the root, to a directory that would pass.
	other := filepath.Join(parent, "other")
	if err := os.MkdirAll(filepath.Join(other, "ws1"), 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, "link")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	if fd, err := openWorkspace(link, "ws1", uid); err == nil {
		unix.Close(fd)
		t.Fatal("a symlinked workspace root was followed")
	} else if !strings.Contains(err.Error(), "symlink") {
		t.Errorf("symlink refusal %q does not say why", err)
	}

	// A parent the supervisor could write: group/other-writable, then owned by another uid.
	if err := os.Chmod(parent, 0o777); err != nil {
		t.Fatal(err)
	}
	if fd, err := openWorkspace(root, "ws1", uid); err == nil {
		unix.Close(fd)
		t.Fatal("a world-writable parent of the workspace root was accepted")
	}
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	chownExec(t, parent, 1, 1)
	if fd, err := openWorkspace(root, "ws1", uid); err == nil {
		unix.Close(fd)
		t.Fatal("a workspace root whose parent is not root-owned was accepted")
	} else if !strings.Contains(err.Error(), "root-owned") {
		t.Errorf("refusal %q does not name the fix", err)
	}
}
