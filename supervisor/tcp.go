package supervisor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"

	"github.com/sandboxd/sandboxd/policy"
)

// ListenTCP opens the TCP listeners of addrs ("tcp://HOST:PORT"), each
// wrapped in TLS when tlsConf is set. On an error the ones already open are
// closed.
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
		if tlsConf != nil {
			ln = tls.NewListener(ln, tlsConf)
		}
		lns = append(lns, ln)
	}
	return lns, nil
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
