package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sandboxd/sandboxd/cgroup"
	"github.com/sandboxd/sandboxd/nsinit/config"
)

// Real returns the live view of this machine.
func Real() Host { return realHost{} }

type realHost struct{}

func (realHost) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

func fileInfo(fi fs.FileInfo) FileInfo {
	out := FileInfo{Mode: fi.Mode(), Size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		out.UID, out.GID = st.Uid, st.Gid
	}
	return out
}

func (realHost) Stat(path string) (FileInfo, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return FileInfo{}, err
	}
	return fileInfo(fi), nil
}

func (realHost) Lstat(path string) (FileInfo, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return FileInfo{}, err
	}
	return fileInfo(fi), nil
}

func (realHost) ReadDir(path string) ([]string, error) {
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

func (realHost) FileCaps(path string) ([]byte, error) {
	buf := make([]byte, 64)
	n, err := unix.Getxattr(path, "security.capability", buf)
	if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return buf[:n], nil
}

func (realHost) LookPath(name string) (string, error) { return exec.LookPath(name) }

// Run runs a program with an empty environment and a time limit.
func (realHost) Run(ctx context.Context, path string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.Bytes(), fmt.Errorf("%w: %s", err, bytes.TrimSpace(out.Bytes()))
	}
	return out.Bytes(), nil
}

func (realHost) GroupName(gid uint32) string {
	if g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10)); err == nil {
		return g.Name
	}
	return strconv.FormatUint(uint64(gid), 10)
}

func (realHost) LoadHelperConfig(path string) (*config.Config, error) { return config.Load(path) }

func (realHost) CheckRootOwned(path string) error { return config.CheckRootOwned(path) }

func (realHost) Cgroups(procDir string, uid int, parent string) (string, string) {
	m := cgroup.Detect(cgroup.Host{ProcSelf: procDir, UID: uid}, parent)
	return m.Mode(), m.Reason()
}

// Supervisor connects to the socket, learns the peer's pid from
// SO_PEERCRED (the process that listens, i.e. the supervisor) and asks
// GET /v1/health on the same connection.
func (realHost) Supervisor(ctx context.Context, socket string) (*Supervisor, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, fmt.Errorf("%s: not a Unix socket connection", socket)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	used := false
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
		if used {
			return nil, errors.New("connection already used")
		}
		used = true
		return conn, nil
	}, DisableKeepAlives: true}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://sandboxd/v1/health", nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusServiceUnavailable {
		return nil, fmt.Errorf("GET /v1/health answered %d: %.300s (a 403 means this uid may not use the API: run doctor as root or as the service user)", resp.StatusCode, bytes.TrimSpace(body))
	}
	var h Health
	if err := json.Unmarshal(body, &h); err != nil || h.Version == "" {
		return nil, fmt.Errorf("GET /v1/health answered %d with a body that is not the health object: %.200q", resp.StatusCode, body)
	}
	return &Supervisor{PID: int(cred.Pid), Health: h}, nil
}
