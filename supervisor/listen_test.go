package supervisor

import (
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestListenCreatesSocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "sandboxd")
	sock := filepath.Join(dir, "s.sock")
	gid := os.Getgid()
	ln, err := Listen(sock, strconv.Itoa(gid))
	if err != nil {
		t.Fatal(err)
	}
	di, err := os.Stat(dir)
	if err != nil || di.Mode().Perm() != 0o750 {
		t.Fatalf("parent dir mode %v, %v; want 0750", di.Mode(), err)
	}
	fi, err := os.Lstat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Fatalf("socket mode %v, want socket 0660", fi.Mode())
	}
	if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != gid {
		t.Fatalf("socket gid %d, want %d", st.Gid, gid)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("temporary socket left behind: %v", entries)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.Close()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(sock); !os.IsNotExist(err) {
		t.Fatalf("Close left the socket: %v", err)
	}
}

func TestListenKeepsExistingDirMode(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ln, err := Listen(filepath.Join(dir, "s.sock"), "")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o755 {
		t.Fatalf("existing dir mode changed to %v", di.Mode())
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s.sock")
	old, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	old.SetUnlinkOnClose(false)
	old.Close() // the file stays, nobody listens: stale
	ln, err := Listen(sock, "")
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	ln.Close()
}

func TestListenRefuses(t *testing.T) {
	t.Run("regular file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.sock")
		if err := os.WriteFile(p, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Listen(p, "")
		if err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("err = %v", err)
		}
		if b, _ := os.ReadFile(p); string(b) != "keep me" {
			t.Fatal("a regular file was removed")
		}
	})
	t.Run("symlink", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "s.sock")
		if err := os.Symlink("/etc/passwd", p); err != nil {
			t.Fatal(err)
		}
		if _, err := Listen(p, ""); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("live socket", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "s.sock")
		first, err := Listen(p, "")
		if err != nil {
			t.Fatal(err)
		}
		defer first.Close()
		_, err = Listen(p, "")
		if err == nil || !strings.Contains(err.Error(), "another process is listening") {
			t.Fatalf("err = %v", err)
		}
		if c, err := net.Dial("unix", p); err != nil {
			t.Fatalf("the live socket was disturbed: %v", err)
		} else {
			c.Close()
		}
	})
	t.Run("path too long", func(t *testing.T) {
		_, err := Listen("/tmp/"+strings.Repeat("x", 120), "")
		if err == nil || !strings.Contains(err.Error(), "at most 107") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("unknown group", func(t *testing.T) {
		_, err := Listen(filepath.Join(t.TempDir(), "s.sock"), "no-such-group-sandboxd")
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestListenCloseSparesReplacement(t *testing.T) {
	p := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(p, "")
	if err != nil {
		t.Fatal(err)
	}
	// Someone replaced our socket with their own file; our Close must not
	// remove theirs.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := os.Lstat(p); err != nil {
		t.Fatalf("Close removed a file that was not its socket: %v", err)
	}
}
