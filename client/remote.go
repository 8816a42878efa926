package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// Remote is how to reach a supervisor's TCP listener.
type Remote struct {
	// URL is http://HOST:PORT or https://HOST:PORT (no path).
	URL string
	// APIKey is sent as "Authorization: Bearer <key>".
	APIKey string
	// CAFile, when set, is the PEM bundle that verifies the server's
	// certificate (a private CA); otherwise the system roots do.
	CAFile string
	// ClientCert and ClientKey, when set, are presented to a supervisor
	// that requires client certificates (--tls-client-ca).
	ClientCert, ClientKey string
}

// NewRemote returns a client for a supervisor's TCP listener.
func NewRemote(r Remote) (*Client, error) {
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil, fmt.Errorf("sandboxd URL %q: %w", r.URL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("sandboxd URL %q: want http://HOST:PORT or https://HOST:PORT", r.URL)
	}
	if strings.ContainsAny(r.APIKey, "\r\n") {
		return nil, errors.New("the API key contains a line break")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil // the key goes to the supervisor, not through a proxy from the environment
	if u.Scheme == "https" {
		conf := &tls.Config{MinVersion: tls.VersionTLS12}
		if r.CAFile != "" {
			pem, err := os.ReadFile(r.CAFile)
			if err != nil {
				return nil, fmt.Errorf("CA file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("CA file %s: no PEM certificate in it", r.CAFile)
			}
			conf.RootCAs = pool
		}
		if r.ClientCert != "" || r.ClientKey != "" {
			pair, err := tls.LoadX509KeyPair(r.ClientCert, r.ClientKey)
			if err != nil {
				return nil, fmt.Errorf("client certificate: %w", err)
			}
			conf.Certificates = []tls.Certificate{pair}
		}
		tr.TLSClientConfig = conf
	} else if r.CAFile != "" || r.ClientCert != "" {
		return nil, fmt.Errorf("sandboxd URL %q is not https, but a CA file or client certificate was given", r.URL)
	}
	base := u.Scheme + "://" + u.Host
	return &Client{socket: base, base: base, key: r.APIKey, http: &http.Client{Transport: tr}}, nil
}

// ReadKeyFile reads an API key from a file: its first line, trimmed.
func ReadKeyFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("API key file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	key := strings.TrimSpace(line)
	if key == "" {
		return "", fmt.Errorf("API key file %s is empty", path)
	}
	return key, nil
}

// newRequest builds a request to the supervisor, with the bearer key when
// there is one.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	return req, nil
}
