package doctor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

type fakeRemote struct {
	url       string
	live      *api.Liveness
	st        *tls.ConnectionState
	liveErr   error
	health    *api.Health
	healthErr error
}

func (f *fakeRemote) URL() string { return f.url }
func (f *fakeRemote) Healthz(context.Context) (*api.Liveness, *tls.ConnectionState, error) {
	return f.live, f.st, f.liveErr
}
func (f *fakeRemote) Health(context.Context) (*api.Health, error) { return f.health, f.healthErr }

func readyHealth() *api.Health {
	return &api.Health{OK: true, Version: "1.2.3", Runtimes: []string{"python", "javascript"},
		Checks: api.HealthChecks{Bwrap: "ok", Userns: "ok", Seccomp: "ok", Helper: "ok", Cgroups: "v2", Disk: "ok"}}
}

func status(rep Report, name string) (Result, bool) {
	for _, r := range rep.Checks {
		if r.Name == name {
			return r, true
		}
	}
	return Result{}, false
}

// TestRunRemote: the remote checks by case; the host checks are listed as
// local-only, never run.
func TestRunRemote(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cert := func(days int) *tls.ConnectionState {
		return &tls.ConnectionState{Version: tls.VersionTLS13, PeerCertificates: []*x509.Certificate{{DNSNames: []string{"sbx.example"}, NotAfter: now.Add(time.Duration(days) * 24 * time.Hour)}}}
	}
	live := &api.Liveness{OK: true, Version: "1.2.3"}
	notReady := readyHealth()
	notReady.OK, notReady.Checks.Helper = false, "the helper lacks its file capabilities"
	for _, tc := range []struct {
		name   string
		r      *fakeRemote
		ok     bool
		check  string
		status Status
		detail string
	}{
		{"tls ready", &fakeRemote{url: "https://sbx.example:8443", live: live, st: cert(90), health: readyHealth()}, true, "remote.connect", OK, "TLS 1.3; certificate for sbx.example"},
		{"cert expiring", &fakeRemote{url: "https://sbx.example:8443", live: live, st: cert(3), health: readyHealth()}, true, "remote.connect", Warn, "3 days left"},
		{"plain http remote", &fakeRemote{url: "http://10.1.2.3:8080", live: live, health: readyHealth()}, true, "remote.connect", Warn, "clear text"},
		{"plain http loopback", &fakeRemote{url: "http://127.0.0.1:8080", live: live, health: readyHealth()}, true, "remote.connect", OK, "loopback"},
		{"unreachable", &fakeRemote{url: "https://sbx.example:8443", liveErr: &url.Error{Op: "Get", URL: "x", Err: x509.UnknownAuthorityError{}}}, false, "remote.connect", Fail, "cannot reach"},
		{"healthz not sandboxd", &fakeRemote{url: "https://sbx.example:8443", st: cert(90), liveErr: errors.New("unexpected answer: HTTP 404"), health: readyHealth()}, false, "remote.healthz", Fail, "404"},
		{"key refused", &fakeRemote{url: "https://sbx.example:8443", live: live, st: cert(90), healthErr: errors.New("unauthenticated: missing or invalid API key")}, false, "remote.auth", Fail, "unauthenticated"},
		{"not ready", &fakeRemote{url: "https://sbx.example:8443", live: live, st: cert(90), health: notReady}, false, "supervisor.helper", Fail, "file capabilities"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := RunRemote(context.Background(), tc.r, now)
			if rep.OK != tc.ok {
				t.Errorf("ok %v, want %v: %+v", rep.OK, tc.ok, rep.Checks)
			}
			r, found := status(rep, tc.check)
			if !found || r.Status != tc.status || !strings.Contains(r.Detail, tc.detail) {
				t.Errorf("%s: %+v, want %s with %q", tc.check, r, tc.status, tc.detail)
			}
			if r.Status != OK && r.Fix == "" {
				t.Errorf("%s without a fix: %+v", tc.check, r)
			}
			if l, ok := status(rep, "local"); !ok || l.Status != Skip || !strings.Contains(l.Detail, "helper.caps") {
				t.Errorf("local-only checks not listed: %+v", l)
			}
		})
	}
	rep := RunRemote(context.Background(), &fakeRemote{url: "https://x", liveErr: &url.Error{Op: "Get", URL: "x", Err: x509.UnknownAuthorityError{}}}, now)
	if r, _ := status(rep, "remote.connect"); !strings.Contains(r.Fix, "--ca-file") {
		t.Errorf("unknown CA fix: %q", r.Fix)
	}
}
