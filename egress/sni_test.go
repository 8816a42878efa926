package egress

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

// clientHello captures the ClientHello crypto/tls sends for serverName.
func clientHello(t testing.TB, serverName string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	go func() {
		c := tls.Client(a, &tls.Config{ServerName: serverName, InsecureSkipVerify: serverName == ""})
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Handshake()
	}()
	b.SetDeadline(time.Now().Add(5 * time.Second))
	hdr := make([]byte, 5)
	if _, err := readFull(b, hdr); err != nil {
		t.Fatal(err)
	}
	n, err := RecordLen(hdr)
	if err != nil {
		t.Fatal(err)
	}
	rec := make([]byte, n)
	copy(rec, hdr)
	if _, err := readFull(b, rec[5:]); err != nil {
		t.Fatal(err)
	}
	return rec
}

func readFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestParseSNI(t *testing.T) {
	for _, name := range []string{"pypi.org", "registry.npmjs.org", "a.b.c.example"} {
		rec := clientHello(t, name)
		got, err := ParseSNI(rec)
		if err != nil || got != name {
			t.Errorf("ParseSNI(hello for %s) = %q, %v", name, got, err)
		}
		// Every truncation is an error, never a panic or a wrong name.
		for i := 0; i < len(rec); i++ {
			if got, err := ParseSNI(rec[:i]); err == nil {
				t.Fatalf("truncated to %d bytes: accepted, name %q", i, got)
			}
		}
	}
	// crypto/tls sends no SNI for an IP address or an empty name.
	if got, err := ParseSNI(clientHello(t, "")); err != nil || got != "" {
		t.Errorf("no-SNI hello: %q, %v", got, err)
	}
}

func TestParseSNIMalformed(t *testing.T) {
	good := clientHello(t, "pypi.org")
	for name, mut := range map[string]func([]byte) []byte{
		"not handshake":   func(b []byte) []byte { b[0] = 0x17; return b },
		"not ClientHello": func(b []byte) []byte { b[5] = 0x02; return b },
		"length past record": func(b []byte) []byte {
			b[6], b[7], b[8] = 0xff, 0xff, 0xff
			return b
		},
		"http": func([]byte) []byte { return []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n") },
	} {
		rec := mut(append([]byte(nil), good...))
		if got, err := ParseSNI(rec); err == nil {
			t.Errorf("%s: accepted, name %q", name, got)
		}
	}
}

func TestCheckSNI(t *testing.T) {
	rec := clientHello(t, "pypi.org")
	if err := checkSNI(rec, "pypi.org"); err != nil {
		t.Errorf("matching SNI refused: %v", err)
	}
	if err := checkSNI(rec, "files.pythonhosted.org"); err == nil {
		t.Error("mismatched SNI accepted (domain fronting)")
	}
	if err := checkSNI(clientHello(t, ""), "pypi.org"); err == nil {
		t.Error("missing SNI accepted")
	}
}

func FuzzParseSNI(f *testing.F) {
	f.Add(clientHello(f, "pypi.org"))
	f.Add(clientHello(f, ""))
	f.Add([]byte{0x16, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Add(rawHello(sniExt("pypi.org"), testExt{typ: 0xfe0d, data: []byte{0, 1}}))
	f.Add(rawHello(sniExt("pypi.org"), testExt{typ: 0xffce}))
	f.Add(rawHello(sniExt("\u212aey.example")))
	f.Fuzz(func(t *testing.T, b []byte) {
		name, err := ParseSNI(b)
		if err != nil && name != "" {
			t.Fatalf("error %v with a name %q", err, name)
		}
		if err == nil {
			if n, _ := RecordLen(b); n != len(b) {
				t.Fatalf("accepted a record of %d bytes, header says %d", len(b), n)
			}
		}
	})
}

// TestCheckSNIRefusesEncryptedHello: a ClientHello with an ECH (0xfe0d) or
// draft ESNI (0xffce) extension carries its real server name encrypted;
// the outer name is whatever the payload wrote, so the hello is refused
// even when the outer name is the CONNECT host.
func TestCheckSNIRefusesEncryptedHello(t *testing.T) {
	for _, typ := range []uint16{0xfe0d, 0xffce} {
		hello := rawHello(sniExt("pypi.test"), testExt{typ: typ, data: []byte{0, 1, 2, 3}})
		err := checkSNI(hello, "pypi.test")
		if err == nil || !strings.Contains(err.Error(), "encrypted") {
			t.Errorf("extension %#04x: checkSNI = %v, want a refusal naming the encrypted ClientHello", typ, err)
		}
	}
	if err := checkSNI(rawHello(sniExt("pypi.test")), "pypi.test"); err != nil {
		t.Errorf("plain hello for the CONNECT host refused: %v", err)
	}
}

// TestCheckSNIASCIIOnly: the server name is compared byte for byte after
// ASCII lower-casing; Unicode case folding (KELVIN SIGN to k, LONG S to s)
// and bytes outside a host name never match.
func TestCheckSNIASCIIOnly(t *testing.T) {
	for _, tc := range []struct {
		sni, host string
		ok        bool
	}{
		{"key.example.com", "key.example.com", true},
		{"KEY.Example.COM", "key.example.com", true},
		{"key.example.com.", "key.example.com", true},
		{"\u212aey.example.com", "key.example.com", false},
		{"\u017fecret.example.com", "secret.example.com", false},
		{"k\x80y.example.com", "key.example.com", false},
		{"key.example.com\x00", "key.example.com", false},
		{"k_y.example.com", "key.example.com", false},
		{"key.example.com..", "key.example.com", false},
	} {
		err := checkSNI(rawHello(sniExt(tc.sni)), tc.host)
		if (err == nil) != tc.ok {
			t.Errorf("SNI %q for %s: err %v, want ok=%v", tc.sni, tc.host, err, tc.ok)
		}
	}
}
