// Package testca makes throwaway certificate authorities and certificates
// for tests: the supervisor's TLS listener, client certificates, and the
// HTTPS stand-ins for "the internet" behind the egress proxy. Keys are
// ECDSA P-256, valid from an hour ago for an hour.
//
// It must never be imported by non-test code.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/internal/atomicfile"
)

// CA is a test certificate authority.
type CA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	PEM  []byte // the CA certificate, PEM-encoded (a client's trust root)
}

// New makes a CA named name.
func New(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Leaf says what a certificate is for.
type Leaf struct {
	Name   string // the subject's common name
	Serial int64  // 0: 2
	Client bool   // client authentication; else server authentication
	DNS    []string
	IPs    []net.IP
}

// Issue signs a certificate for l and returns it with its key.
func (ca *CA) Issue(t testing.TB, l Leaf) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, usage := l.Serial, x509.ExtKeyUsageServerAuth
	if serial == 0 {
		serial = 2
	}
	if l.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: l.Name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: l.DNS, IPAddresses: l.IPs}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// WriteLeaf issues a certificate for l and writes dir/<l.Name>.crt and
// .key (mode 0600). Each is replaced atomically, as a certificate renewal
// would be, so a reload never reads half a file.
func (ca *CA) WriteLeaf(t testing.TB, dir string, l Leaf) (certPath, keyPath string) {
	t.Helper()
	c := ca.Issue(t, l)
	kb, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, l.Name+".crt"), filepath.Join(dir, l.Name+".key")
	for p, b := range map[string][]byte{
		certPath: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}),
		keyPath:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}),
	} {
		if err := atomicfile.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certPath, keyPath
}

// WriteCA writes the CA certificate to dir/ca.pem (mode 0600) and returns
// its path.
func (ca *CA) WriteCA(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "ca.pem")
	if err := atomicfile.WriteFile(p, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
