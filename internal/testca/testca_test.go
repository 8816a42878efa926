package testca

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
)

// TestIssueVerifies: a leaf verifies against its CA for its names and
// usage only, and the written files load as a key pair.
func TestIssueVerifies(t *testing.T) {
	ca := New(t, "unit CA")
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca.PEM) {
		t.Fatal("CA PEM does not parse")
	}
	c := ca.Issue(t, Leaf{Name: "srv", DNS: []string{"a.test"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		usage x509.ExtKeyUsage
		ok    bool
	}{{"a.test", x509.ExtKeyUsageServerAuth, true}, {"127.0.0.1", x509.ExtKeyUsageServerAuth, true},
		{"b.test", x509.ExtKeyUsageServerAuth, false}, {"a.test", x509.ExtKeyUsageClientAuth, false}} {
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: tt.name, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
		if (err == nil) != tt.ok {
			t.Errorf("verify %s usage %v: %v, want ok=%v", tt.name, tt.usage, err, tt.ok)
		}
	}
	dir := t.TempDir()
	cp, kp := ca.WriteLeaf(t, dir, Leaf{Name: "client", Client: true, Serial: 7})
	pair, err := tls.LoadX509KeyPair(cp, kp)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := x509.ParseCertificate(pair.Certificate[0]); got.SerialNumber.Int64() != 7 || got.ExtKeyUsage[0] != x509.ExtKeyUsageClientAuth {
		t.Fatalf("written leaf: serial %v usage %v", got.SerialNumber, got.ExtKeyUsage)
	}
}
