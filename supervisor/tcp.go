package supervisor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/policy"
)

// ListenTCP opens the TCP listeners of addrs ("tcp://HOST:PORT"), each
// wrapped in TLS when tlsConf is set. On an error the ones already open are
// closed. A listener asked for by the name localhost must be bound to a
// loopback address: the name is resolved (hosts file, then DNS), and a
// resolution elsewhere would put a listener, perhaps one without keys, on
// the network.
func ListenTCP(addrs []string, tlsConf *tls.Config) ([]net.Listener, error) {
	var lns []net.Listener
	for _, a := range addrs {
		hp, err := policy.ParseListen(a)
		if err != nil {
			closeAll(lns)
			return nil, fmt.Errorf("listen: %w", err)
		}
		ln, err := net.Listen("tcp", hp)
		if err != nil {
			closeAll(lns)
			return nil, fmt.Errorf("listen on %s: %w", a, err)
		}
		if err := checkLocalhostBound(hp, ln.Addr()); err != nil {
			_ = ln.Close()
			closeAll(lns)
			return nil, fmt.Errorf("listen on %s: %w", a, err)
		}
		ln = &tcpListener{TCPListener: ln.(*net.TCPListener), name: ln.Addr().String()}
		if tlsConf != nil {
			ln = tls.NewListener(ln, tlsConf)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// tcpListener marks each connection it accepts with the listener's name,
// so that the connection counts in that listener's budget (callerLimits):
// a listener on a wildcard address accepts on many local addresses, and a
// budget per local address would multiply the budget.
type tcpListener struct {
	*net.TCPListener
	name string
}

func (l *tcpListener) Accept() (net.Conn, error) {
	c, err := l.AcceptTCP()
	if err != nil {
		return nil, err
	}
	return &tcpConn{TCPConn: c, listener: l.name}, nil
}

// tcpConn is a TCP connection and the listener that accepted it. It embeds
// *net.TCPConn so that net/http still finds CloseWrite and ReadFrom.
type tcpConn struct {
	*net.TCPConn
	listener string
}

// tcpPool is the connection budget c counts in: its listener's (by the
// address it was bound to), or, for a connection of a listener ListenTCP
// did not open, its local port's.
func tcpPool(c net.Conn) string {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if nc, ok := c.(*tcpConn); ok {
		return "tcp " + nc.listener
	}
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		return "tcp :" + strconv.Itoa(a.Port)
	}
	return "tcp " + c.LocalAddr().String()
}

// checkLocalhostBound refuses a listener asked for as localhost that is
// bound to an address that is not loopback.
func checkLocalhostBound(hostPort string, bound net.Addr) error {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil || !isLocalhostName(host) {
		return nil
	}
	ta, ok := bound.(*net.TCPAddr)
	if !ok || !ta.IP.IsLoopback() {
		return errdefs.New(errdefs.ErrInvalid, fmt.Sprintf("localhost resolved to %s, which is not a loopback address", bound),
			"listen on a loopback literal (tcp://127.0.0.1:PORT or tcp://[::1]:PORT), or fix localhost in /etc/hosts", nil)
	}
	return nil
}

// isLocalhostName reports whether host is the name localhost (any case,
// with or without the root's trailing dot).
func isLocalhostName(host string) bool {
	return strings.EqualFold(strings.TrimSuffix(host, "."), "localhost")
}

func closeAll(lns []net.Listener) {
	for _, ln := range lns {
		_ = ln.Close()
	}
}

// CertReloader serves the TLS certificate of --tls-cert/--tls-key and
// replaces it on Reload (SIGHUP), so a renewed certificate takes effect
// without a restart. A reload that fails keeps the old certificate.
type CertReloader struct {
	certPath, keyPath string
	cur               atomic.Pointer[tls.Certificate]
}

// NewCertReloader loads the certificate and key once.
func NewCertReloader(certPath, keyPath string) (*CertReloader, error) {
	r := &CertReloader{certPath: certPath, keyPath: keyPath}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the certificate and key again.
func (r *CertReloader) Reload() error {
	c, err := tls.LoadX509KeyPair(r.certPath, r.keyPath)
	if err != nil {
		return fmt.Errorf("tls certificate %s, key %s: %w", r.certPath, r.keyPath, err)
	}
	r.cur.Store(&c)
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (r *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.cur.Load(), nil
}

// TLSConfig is the TCP listeners' TLS: TLS 1.2 at least, the reloader's
// certificate, and, with clientCAPath, a client certificate required and
// verified against that bundle.
func TLSConfig(r *CertReloader, clientCAPath string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}
	if clientCAPath == "" {
		return conf, nil
	}
	pem, err := os.ReadFile(clientCAPath)
	if err != nil {
		return nil, fmt.Errorf("tls client CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("tls client CA " + clientCAPath + ": no PEM certificate in it")
	}
	conf.ClientCAs = pool
	conf.ClientAuth = tls.RequireAndVerifyClientCert
	return conf, nil
}
