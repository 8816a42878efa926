package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoteFlags: --url with the key from --api-key-file or
// $SANDBOXD_API_KEY sends it as a bearer token; $SANDBOXD_URL works as
// --url; key and CA flags without a URL are a usage error.
func TestRemoteFlags(t *testing.T) {
	var got []string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"version":"1","checks":{"bwrap":"ok","userns":"ok","seccomp":"ok","helper":"ok","cgroups":"v2","disk":"ok"},"runtimes":["python"]}`))
	}))
	defer ts.Close()
	keyFile := filepath.Join(t.TempDir(), "k")
	if err := os.WriteFile(keyFile, []byte("filekey\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := ctl(t, "", "", nil, "health", "--url", ts.URL, "--api-key-file", keyFile); r.code != 0 {
		t.Fatalf("--api-key-file: %+v", r)
	}
	if r := ctl(t, "", "", map[string]string{"SANDBOXD_URL": ts.URL, "SANDBOXD_API_KEY": "envkey"}, "health"); r.code != 0 {
		t.Fatalf("env: %+v", r)
	}
	if len(got) != 2 || got[0] != "Bearer filekey" || got[1] != "Bearer envkey" {
		t.Fatalf("Authorization headers %q", got)
	}
	if r := ctl(t, "/nonexistent.sock", "", nil, "health", "--api-key-file", keyFile); r.code != exitUsage || !strings.Contains(r.stderr, "need --url") {
		t.Fatalf("key without url: %+v", r)
	}
}
