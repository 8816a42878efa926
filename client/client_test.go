package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// serveUnix answers every request with h on a Unix socket.
func serveUnix(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "c.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return sock
}

func TestAnswers(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		hdr       map[string]string
		body      string
		wantAPI   *APIError
		wantErrIn string
	}{
		{"api error with retry", 429, map[string]string{"Retry-After": "1"}, `{"error":{"code":"limit_exceeded","message":"busy"}}`,
			&APIError{Status: 429, Code: "limit_exceeded", Message: "busy", RetryAfter: "1"}, ""},
		{"plain text error", 502, nil, "Bad Gateway", nil, `unexpected answer: HTTP 502: "Bad Gateway"`},
		{"error without code", 500, nil, `{"error":{}}`, nil, "unexpected answer: HTTP 500"},
		{"200 that is not a result", 200, nil, `[]`, nil, "decode exec result"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tc.hdr {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			})
			_, _, err := New(sock).Exec(context.Background(), ExecRequest{Language: "python", Code: "1"})
			var apiErr *APIError
			if tc.wantAPI != nil {
				if !errors.As(err, &apiErr) || *apiErr != *tc.wantAPI {
					t.Fatalf("err = %#v, want %#v", err, tc.wantAPI)
				}
				return
			}
			if err == nil || errors.As(err, &apiErr) || !strings.Contains(err.Error(), tc.wantErrIn) {
				t.Fatalf("err = %v, want a non-API error containing %q", err, tc.wantErrIn)
			}
		})
	}
}

func TestHealthAnswers(t *testing.T) {
	sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/health" || r.Method != "GET" {
			t.Errorf("request %s %s", r.Method, r.URL.Path)
		}
		w.WriteHeader(503)
		w.Write([]byte(`{"ok":false,"version":"1","checks":{"bwrap":"missing"},"runtimes":["python"],"new_field":1}`))
	})
	h, _, err := New(sock).Health(context.Background())
	if err != nil || h.OK || h.Checks.Bwrap != "missing" {
		t.Fatalf("health %+v, %v", h, err)
	}

	bare := serveUnix(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	if _, _, err := New(bare).Health(context.Background()); err == nil || !strings.Contains(err.Error(), "HTTP 503") {
		t.Fatalf("503 without a health body: %v", err)
	}
}

func TestExecRequestOmitsUnset(t *testing.T) {
	var got string
	sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		b := make([]byte, 1024)
		n, _ := r.Body.Read(b)
		got = string(b[:n])
		if ct := r.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
		w.Write([]byte(`{"id":"x","exit_code":0}`))
	})
	if _, _, err := New(sock).Exec(context.Background(), ExecRequest{Language: "python", Code: "1"}); err != nil {
		t.Fatal(err)
	}
	if got != `{"language":"python","code":"1"}` {
		t.Fatalf("body %s", got)
	}
}
