package client

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemote: NewRemote sends the bearer key, verifies the server with the
// CA file, and refuses a server its CA did not sign.
func TestRemote(t *testing.T) {
	var gotAuth string
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAuth = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true,"version":"9","checks":{"bwrap":"ok"}}`))
	}))
	defer ts.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ts.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewRemote(Remote{URL: ts.URL, APIKey: "k123", CAFile: ca})
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := c.Health(context.Background())
	if err != nil || !h.OK || gotAuth != "Bearer k123" {
		t.Fatalf("health %+v, err %v, auth %q", h, err, gotAuth)
	}
	// Without the CA file the system roots do not know the test server.
	c2, err := NewRemote(Remote{URL: ts.URL, APIKey: "k123"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c2.Health(context.Background()); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unverified server: %v", err)
	}
	for _, bad := range []string{"ftp://x:1", "https://x:1/v1", "x:1", "https://u:p@x:1"} {
		if _, err := NewRemote(Remote{URL: bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
