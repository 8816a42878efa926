package doctor

// The remote checks: `sandboxctl doctor --url https://…` looks at a
// supervisor through one of its TCP listeners, as a client on another
// machine would. Only what the wire shows can be checked from there: the
// connection and its TLS, /healthz without a key, the key itself, and the
// supervisor's own readiness checks (GET /v1/health, which runs a real
// launch on its host). Every other check reads the supervisor host's files,
// sysctls or processes and is local-only (localOnlyChecks).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
)

// Remote is what the remote checks read: a supervisor's TCP listener.
type Remote interface {
	// URL is the listener's URL (http:// or https://HOST:PORT).
	URL() string
	// Healthz asks GET /healthz without a key and returns the TLS state
	// of the connection (nil over http). A connection or handshake
	// failure is a wrapped *url.Error.
	Healthz(ctx context.Context) (*api.Liveness, *tls.ConnectionState, error)
	// Health asks GET /v1/health with the API key.
	Health(ctx context.Context) (*api.Health, error)
}

// localOnlyChecks are the checks that read the supervisor's host (files,
// sysctls, extended attributes, /proc) and cannot run remotely.
var localOnlyChecks = []string{
	"userns", "bwrap", "helper", "helper.caps", "helper.dir", "helper.config", "profile", "profile.cache",
	"seccomp", "no_new_privs", "supervisor.privileges", "groups", "state_dir", "cgroups (delegation)", "runtimes", "environments (trees)",
}

// certWarnBefore is how close to its expiry a server certificate is warned
// about.
const certWarnBefore = 14 * 24 * time.Hour

// RunRemote performs the remote checks at now and returns the report.
func RunRemote(ctx context.Context, r Remote, now time.Time) Report {
	var rs []Result
	conn, live := checkRemoteConnect(ctx, r, now)
	rs = append(rs, conn)
	if conn.Status != Fail {
		rs = append(rs, live)
		rs = append(rs, checkRemoteHealth(ctx, r)...)
	}
	rs = append(rs, Result{Name: "local", Status: Skip,
		Detail: "not checked remotely (they read the supervisor host's files, sysctls and processes): " + strings.Join(localOnlyChecks, ", "),
		Fix:    "run sandboxctl doctor on the supervisor's host for those"})
	rep := Report{OK: true, Checks: rs}
	for _, c := range rs {
		if c.Status == Fail {
			rep.OK = false
		}
	}
	return rep
}

// checkRemoteConnect: the listener answers /healthz without a key, over
// TLS with a certificate this client verifies and that is not about to
// expire; plain HTTP only on loopback. It returns the connection's result
// and the /healthz one.
func checkRemoteConnect(ctx context.Context, r Remote, now time.Time) (Result, Result) {
	c := Result{Name: "remote.connect"}
	h := Result{Name: "remote.healthz"}
	live, st, err := r.Healthz(ctx)
	var uerr *url.Error
	if err != nil && errors.As(err, &uerr) {
		c.Status, c.Detail, c.Fix = Fail, fmt.Sprintf("cannot reach %s: %v", r.URL(), err), connectFix(err)
		return c, h
	}
	c.Status, c.Detail = OK, "connected to "+r.URL()
	if st == nil {
		if u, perr := url.Parse(r.URL()); perr == nil && !isLoopbackHost(u.Hostname()) {
			c.Status = Warn
			c.Detail += " over plain HTTP: the API key travels in clear text"
			c.Fix = "give the supervisor --tls-cert and --tls-key, or put a TLS-terminating proxy in front, and use an https:// URL"
		} else {
			c.Detail += " over plain HTTP on loopback"
		}
	} else {
		describeTLS(&c, st, now)
	}
	switch {
	case err != nil:
		h.Status, h.Detail = Fail, fmt.Sprintf("GET /healthz without a key: %v", err)
		h.Fix = "a load balancer's probe will fail too; check that this is a sandboxd listener (a proxy in front may answer for it)"
	default:
		h.Status, h.Detail = OK, "sandboxd "+live.Version+" answers GET /healthz without a key"
	}
	return c, h
}

// describeTLS adds the TLS version, the certificate's subject and expiry
// to c, and warns about a certificate about to expire.
func describeTLS(c *Result, st *tls.ConnectionState, now time.Time) {
	c.Detail += " over " + tls.VersionName(st.Version)
	if len(st.PeerCertificates) == 0 {
		return
	}
	leaf := st.PeerCertificates[0]
	names := leaf.DNSNames
	for _, ip := range leaf.IPAddresses {
		names = append(names, ip.String())
	}
	c.Detail += fmt.Sprintf("; certificate for %s, valid until %s", strings.Join(names, ", "), leaf.NotAfter.UTC().Format(time.DateOnly))
	if left := leaf.NotAfter.Sub(now); left < certWarnBefore {
		c.Status = Warn
		c.Detail += fmt.Sprintf(" (%d days left)", int(left.Hours()/24))
		c.Fix = "renew the certificate; the supervisor reloads --tls-cert and --tls-key on SIGHUP"
	}
}

// connectFix is the fix of a connection failure, by its cause.
func connectFix(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	switch {
	case errors.As(err, &unknown):
		return "the server's certificate is signed by a CA this client does not trust: pass --ca-file with the CA's PEM"
	case errors.As(err, &host):
		return "the certificate does not name the host of --url: use a name the certificate carries, or reissue it"
	case errors.As(err, &invalid):
		return "the server's certificate is expired or not valid yet: renew it (the supervisor reloads it on SIGHUP)"
	case strings.Contains(err.Error(), "certificate required"), strings.Contains(err.Error(), "bad certificate"):
		return "the supervisor requires a client certificate (--tls-client-ca): pass --client-cert and --client-key"
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		return "the listener speaks plain HTTP: use an http:// URL, or give the supervisor --tls-cert and --tls-key"
	}
	return "check that sandboxd runs with --listen tcp://HOST:PORT for this address, and that no firewall is in the way"
}

func isLoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// checkRemoteHealth: the key is accepted, and the supervisor's readiness
// checks, one result each (GET /v1/health runs a real launch on its host).
func checkRemoteHealth(ctx context.Context, r Remote) []Result {
	auth := Result{Name: "remote.auth"}
	hl, err := r.Health(ctx)
	if err != nil {
		auth.Status, auth.Detail = Fail, fmt.Sprintf("GET /v1/health with the API key: %v", err)
		switch msg := err.Error(); {
		case strings.Contains(msg, string(api.CodeUnauthenticated)):
			auth.Fix = "the key was refused: pass --api-key-file with a key of the supervisor's --api-keys-file (or set SANDBOXD_API_KEY)"
		case strings.Contains(msg, string(api.CodeLimitExceeded)):
			auth.Fix = "this address is rate-limited after failed keys: wait a minute, then retry with the right key"
		default:
			auth.Fix = "see the error; the supervisor's log names the refused request"
		}
		return []Result{auth}
	}
	auth.Status, auth.Detail = OK, "the API key is accepted"
	out := []Result{auth}
	checks := hl.Checks.List()
	sort.Slice(checks, func(i, j int) bool { return checks[i].Name < checks[j].Name })
	for _, c := range checks {
		if c.Value == "" {
			continue
		}
		res := Result{Name: "supervisor." + c.Name, Status: OK, Detail: c.Value}
		switch {
		case c.Name == "cgroups":
			if c.Value == "none" {
				res.Status, res.Detail = Warn, "none: memory, pids and CPU limits are not enforced on the supervisor's host"
				res.Fix = "run sandboxctl doctor on the supervisor's host: its cgroups check names the fix"
			}
		case c.Name == "archive":
			if c.Value != api.CheckOK {
				res.Status = Warn
			}
		case c.Value != api.CheckOK:
			res.Status, res.Fix = Fail, "run sandboxctl doctor on the supervisor's host for the cause and the fix"
		}
		out = append(out, res)
	}
	ready := Result{Name: "supervisor", Status: OK, Detail: fmt.Sprintf("sandboxd %s is ready: a real launch through the helper and bwrap works; runtimes %s", hl.Version, strings.Join(hl.Runtimes, ", "))}
	if !hl.OK {
		ready.Status, ready.Detail = Fail, fmt.Sprintf("sandboxd %s is NOT ready", hl.Version)
		ready.Fix = "follow the failing supervisor.* checks above"
	}
	out = append(out, ready)
	for _, e := range hl.Environments {
		res := Result{Name: "environment." + e.Name, Status: OK, Detail: e.Status}
		if e.Status != api.CheckOK {
			res.Status, res.Fix = Fail, "its execs are refused: run sandboxctl doctor on the supervisor's host"
		}
		out = append(out, res)
	}
	return out
}
