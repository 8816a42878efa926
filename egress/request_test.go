package egress

import (
	"bufio"
	"strings"
	"testing"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		head    string
		want    Target
		wantErr string
	}{
		{"CONNECT pypi.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", Target{Connect: true, Host: "pypi.org", Port: 443}, ""},
		{"CONNECT PyPI.Org.:443 HTTP/1.1\r\n\r\n", Target{Connect: true, Host: "pypi.org", Port: 443}, ""},
		{"CONNECT pypi.org HTTP/1.1\r\n\r\n", Target{}, "host:port"},
		{"CONNECT 10.0.0.1:443 HTTP/1.1\r\n\r\n", Target{}, "IP literal"},
		{"CONNECT [::1]:443 HTTP/1.1\r\n\r\n", Target{}, "IP literal"},
		{"CONNECT pypi.org:99999 HTTP/1.1\r\n\r\n", Target{}, "1-65535"},
		{"CONNECT http://pypi.org:443/ HTTP/1.1\r\n\r\n", Target{}, "host:port"},
		{"GET http://pypi.org/simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", Target{Host: "pypi.org", Port: 80}, ""},
		{"GET http://pypi.org:8080/x HTTP/1.1\r\nHost: pypi.org:8080\r\n\r\n", Target{Host: "pypi.org", Port: 8080}, ""},
		// net/http takes the host from an absolute URL and drops the Host
		// header (RFC 9112 §3.2.2); the forwarded request carries the URL's
		// (TestForwardableStripsHopHeaders).
		{"GET http://pypi.org/ HTTP/1.1\r\nHost: evil.com\r\n\r\n", Target{Host: "pypi.org", Port: 80}, ""},
		{"GET /simple/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", Target{}, "absolute"},
		{"GET https://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", Target{}, "use CONNECT"},
		{"GET ftp://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", Target{}, "scheme"},
		{"GET http://u:p@pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", Target{}, "credentials"},
		{"TRACE http://pypi.org/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", Target{}, "not forwarded"},
		{"GET http://localhost/ HTTP/1.1\r\nHost: localhost\r\n\r\n", Target{Host: "localhost", Port: 80}, ""},
		{"GET http://169.254.169.254/latest/ HTTP/1.1\r\nHost: 169.254.169.254\r\n\r\n", Target{}, "IP literal"},
		{"GET http://2130706433/ HTTP/1.1\r\nHost: 2130706433\r\n\r\n", Target{}, "numeric"},
	} {
		req, err := readRequest(bufio.NewReader(strings.NewReader(tc.head)))
		if err != nil {
			t.Errorf("%q: %v", tc.head, err)
			continue
		}
		got, err := ParseTarget(req)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want one containing %q", tc.head, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.head, got, err, tc.want)
		}
	}
}

func TestForwardableStripsHopHeaders(t *testing.T) {
	head := "GET http://pypi.org/simple/?q=1 HTTP/1.1\r\nHost: evil.com\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive, X-Secret\r\nX-Secret: 1\r\nAccept: */*\r\n\r\n"
	req, err := readRequest(bufio.NewReader(strings.NewReader(head)))
	if err != nil {
		t.Fatal(err)
	}
	tg, err := ParseTarget(req)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := forwardable(req, tg).Write(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "GET /simple/?q=1 HTTP/1.1\r\n") {
		t.Errorf("not origin form: %q", out)
	}
	if !strings.Contains(out, "\r\nHost: pypi.org\r\n") {
		t.Errorf("the URL's host is not the one sent: %q", out)
	}
	for _, h := range []string{"Proxy-Authorization", "X-Secret", "keep-alive", "evil.com"} {
		if strings.Contains(out, h) {
			t.Errorf("%s forwarded: %q", h, out)
		}
	}
	if !strings.Contains(out, "Connection: close") || !strings.Contains(out, "Accept: */*") {
		t.Errorf("want Connection: close and Accept kept: %q", out)
	}
}
