package egress

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Target is where a request asks to go.
type Target struct {
	Connect bool // an HTTP CONNECT tunnel; otherwise a plain-HTTP forward
	Host    string
	Port    int
}

// methods a plain-HTTP forward may use. Anything else (TRACE, WebDAV
// verbs, made-up ones) is refused: nothing a package manager needs.
var methods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPut: true,
	http.MethodPatch: true, http.MethodDelete: true, http.MethodOptions: true,
}

// readRequest reads one request head from br, which must be bounded by the
// caller (maxHead). It never follows anything the head says beyond it.
func readRequest(br *bufio.Reader) (*http.Request, error) {
	req, err := http.ReadRequest(br)
	if err != nil {
		return nil, fmt.Errorf("unreadable proxy request: %w", err)
	}
	return req, nil
}

// ParseTarget checks a request head and returns its destination. A
// CONNECT must name host:port in authority form; a forward must use an
// absolute http:// URL whose host equals the Host header (so the name the
// allowlist checked is the one the server sees).
func ParseTarget(req *http.Request) (Target, error) {
	if req.Method == http.MethodConnect {
		if req.URL == nil || req.URL.Scheme != "" || req.URL.Path != "" || req.RequestURI != req.URL.Host {
			return Target{}, fmt.Errorf("CONNECT wants host:port, got %q", trunc(req.RequestURI))
		}
		host, port, err := splitAuthority(req.RequestURI, 0)
		return Target{Connect: true, Host: host, Port: port}, err
	}
	if !methods[req.Method] {
		return Target{}, fmt.Errorf("method %q is not forwarded", trunc(req.Method))
	}
	u := req.URL
	if u == nil || !u.IsAbs() {
		return Target{}, fmt.Errorf("a proxy request wants an absolute http:// URL, got %q", trunc(req.RequestURI))
	}
	if u.Scheme != "http" {
		return Target{}, fmt.Errorf("scheme %q: use CONNECT for https (the proxy never terminates TLS)", trunc(u.Scheme))
	}
	if u.User != nil {
		return Target{}, fmt.Errorf("credentials in the URL are not forwarded")
	}
	host, port, err := splitAuthority(u.Host, 80)
	if err != nil {
		return Target{}, err
	}
	// net/http already replaced a Host header with the URL's host (RFC
	// 9112 §3.2.2); this holds the invariant should that ever change.
	if req.Host != "" && !sameAuthority(req.Host, host, port) {
		return Target{}, fmt.Errorf("the Host header %q does not match the URL's host %q", trunc(req.Host), host)
	}
	return Target{Host: host, Port: port}, nil
}

// splitAuthority parses host[:port]; defPort 0 means the port is required.
func splitAuthority(a string, defPort int) (string, int, error) {
	host, portStr, err := net.SplitHostPort(a)
	if err != nil {
		if defPort == 0 || strings.Contains(a, "]") || strings.Count(a, ":") > 0 {
			return "", 0, fmt.Errorf("authority %q: want host:port", trunc(a))
		}
		host, portStr = a, strconv.Itoa(defPort)
	}
	port, err := parsePort(portStr)
	if err != nil {
		return "", 0, fmt.Errorf("authority %q: %w", trunc(a), err)
	}
	name, err := NormalizeHost(host)
	if err != nil {
		return strings.ToLower(host), port, err
	}
	return name, port, nil
}

func sameAuthority(hdr, host string, port int) bool {
	h, p, err := splitAuthority(hdr, 80)
	return err == nil && h == host && p == port
}

// hopHeaders are not forwarded (RFC 9110 §7.6.1), Proxy-* least of all:
// the destination must never see the sandbox's proxy credentials.
var hopHeaders = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authorization",
	"Proxy-Authenticate", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// forwardable turns a checked proxy request into the origin-form request
// sent upstream: hop-by-hop headers stripped, one request per connection,
// and t's normalised host[:port] as the URL host and Host header, so the
// server sees exactly the name the allowlist checked (not the payload's
// spelling of it: case, a trailing dot).
func forwardable(req *http.Request, t Target) *http.Request {
	for _, name := range strings.Split(req.Header.Get("Connection"), ",") {
		if name = strings.TrimSpace(name); name != "" {
			req.Header.Del(name)
		}
	}
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	host := t.Host
	if t.Port != 80 {
		host = net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
	}
	req.URL = &url.URL{Scheme: "http", Host: host, Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	req.Host = req.URL.Host // the name the allowlist checked is the one sent
	req.RequestURI = ""
	req.Close = true
	return req
}
