package supervisor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"

	"github.com/sandboxd/sandboxd/launch"
	"golang.org/x/sys/unix"
)

type peerKey struct{}

// peer is what ConnContext learned about a connection. Credentials are read
// once, at accept: SO_PEERCRED reports the peer as it was at connect(), which
// is what the kernel vouches for, and re-reading per request would add a
// syscall without adding truth.
type peer struct {
	caller launch.Caller
	err    error
	// tcp is set for a connection of a TCP listener: its caller comes
	// from the request's API key (authenticateTCP), not from the kernel.
	tcp  bool
	addr string // the remote IP of a TCP connection
	// conn is a TCP connection itself, so that authenticating its request
	// can move it from the listener's unauthenticated connection budget
	// to the caller's share (callerLimits.authenticated).
	conn net.Conn
}

// connContext is http.Server.ConnContext: it attaches the peer's kernel
// credentials to every request of the connection.
func connContext(ctx context.Context, c net.Conn) context.Context {
	if isTCP(c) {
		return context.WithValue(ctx, peerKey{}, peer{tcp: true, addr: remoteIP(c), conn: c,
			err: errors.New("a TCP request has no caller until its API key is checked")})
	}
	caller, err := peerCredentials(c)
	return context.WithValue(ctx, peerKey{}, peer{caller: caller, err: err})
}

func peerCredentials(c net.Conn) (launch.Caller, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return launch.Caller{}, fmt.Errorf("connection is %T, not a Unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return launch.Caller{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return launch.Caller{}, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return launch.Caller{}, fmt.Errorf("getsockopt SO_PEERCRED: %w", credErr)
	}
	return launch.Caller{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}, nil
}

// callerFrom returns the request's peer. A request without credentials (not
// over a Unix socket, or getsockopt failed) is an error, and the caller of
// callerFrom refuses it: no credentials means no access.
func callerFrom(ctx context.Context) (launch.Caller, error) {
	p, ok := ctx.Value(peerKey{}).(peer)
	if !ok {
		return launch.Caller{}, errors.New("no peer credentials on this connection")
	}
	return p.caller, p.err
}

// authorized is the access decision of API.md: root (which could take the
// supervisor over anyway), the supervisor's own uid, an allowed uid, or an
// allowed primary gid. Only the primary gid counts because SO_PEERCRED does
// not carry supplementary groups; reading them from /proc/<pid>/status would
// race with the pid being reused.
func authorized(c launch.Caller, selfUID int, allowUIDs, allowGIDs []int) bool {
	return c.UID == 0 ||
		c.UID == selfUID ||
		slices.Contains(allowUIDs, c.UID) ||
		slices.Contains(allowGIDs, c.GID)
}
