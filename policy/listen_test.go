package policy

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// TestListenValidation: a TCP listener without keys is refused unless
// --allow-no-auth and every address is loopback; TLS flags go together.
func TestListenValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		err  string
	}{
		{"keys", []string{"--listen", "tcp://0.0.0.0:8080", "--api-keys-file", "/etc/sandboxd/keys"}, ""},
		{"no keys", []string{"--listen", "tcp://127.0.0.1:8080"}, "refusing to listen on TCP without API keys"},
		{"no auth loopback", []string{"--listen", "tcp://127.0.0.1:8080,tcp://[::1]:8081", "--allow-no-auth"}, ""},
		{"no auth localhost", []string{"--listen", "tcp://localhost:8080", "--allow-no-auth"}, ""},
		{"no auth any v4", []string{"--listen", "tcp://127.0.0.1:1", "--listen", "tcp://0.0.0.0:8080", "--allow-no-auth"}, "tcp://0.0.0.0:8080 is not a loopback address"},
		{"no auth any v6", []string{"--listen", "tcp://[::]:8080", "--allow-no-auth"}, "not a loopback address"},
		{"no auth empty host", []string{"--listen", "tcp://:8080", "--allow-no-auth"}, "not a loopback address"},
		{"no auth name", []string{"--listen", "tcp://example.org:8080", "--allow-no-auth"}, "not a loopback address"},
		{"no scheme", []string{"--listen", "127.0.0.1:8080"}, "want tcp://HOST:PORT"},
		{"bad port", []string{"--listen", "tcp://127.0.0.1:99999"}, "not in 0..65535"},
		{"cert without key", []string{"--listen", "tcp://127.0.0.1:1", "--api-keys-file", "/k", "--tls-cert", "/c"}, "go together"},
		{"client ca without tls", []string{"--listen", "tcp://127.0.0.1:1", "--api-keys-file", "/k", "--tls-client-ca", "/ca"}, "need TLS"},
		{"tls without listen", []string{"--tls-cert", "/c", "--tls-key", "/k"}, "no --listen"},
		{"e2b keys", []string{"--e2b-listen", "0.0.0.0:8081", "--api-keys-file", "/etc/sandboxd/keys"}, ""},
		{"e2b no keys", []string{"--e2b-listen", "127.0.0.1:8081"}, "refusing to listen on TCP without API keys"},
		{"e2b no auth loopback", []string{"--e2b-listen", "127.0.0.1:8081", "--allow-no-auth"}, ""},
		{"e2b no auth any", []string{"--e2b-listen", "0.0.0.0:8081", "--allow-no-auth"}, "not a loopback address"},
		{"e2b bad port", []string{"--e2b-listen", "127.0.0.1:99999", "--api-keys-file", "/k"}, "not in 0..65535"},
		{"e2b tls", []string{"--e2b-listen", "127.0.0.1:1", "--api-keys-file", "/k", "--tls-cert", "/c", "--tls-key", "/k2"}, ""},
		{"relative keys", []string{"--listen", "tcp://127.0.0.1:1", "--api-keys-file", "keys"}, "not an absolute path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("t", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			_, err := Load(fs, tc.args, func(string) string { return "" })
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("err %v; want %q", err, tc.err)
			}
		})
	}
}

// TestListenEnv: SANDBOXD_LISTEN and SANDBOXD_ALLOW_NO_AUTH set the same.
func TestListenEnv(t *testing.T) {
	env := map[string]string{"SANDBOXD_LISTEN": "tcp://127.0.0.1:9000", "SANDBOXD_ALLOW_NO_AUTH": "1"}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	c, err := Load(fs, nil, func(k string) string { return env[k] })
	if err != nil || len(c.Listen) != 1 || !c.AllowNoAuth {
		t.Fatalf("%+v %v", c.Listen, err)
	}
}

// TestEgressPermittedKeys: a key caller may use egress only when its key is
// marked egress; the uid list never applies to it (its uid is -1).
func TestEgressPermittedKeys(t *testing.T) {
	cfg := Defaults()
	cfg.EgressAllowUIDs = []int{1000}
	for _, tc := range []struct {
		c    Caller
		want bool
	}{
		{Caller{UID: 1000}, true},
		{Caller{UID: 1001}, false},
		{Caller{UID: -1, Key: "alice"}, false},
		{Caller{UID: -1, Key: "alice", Egress: true}, true},
		{Caller{UID: 1000, Key: "alice"}, false},
	} {
		if got := EgressPermitted(tc.c, cfg); got != tc.want {
			t.Errorf("%+v: %v; want %v", tc.c, got, tc.want)
		}
	}
}
