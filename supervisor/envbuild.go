package supervisor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/audit"
	"github.com/sandboxd/sandboxd/audit/facts"
	"github.com/sandboxd/sandboxd/egress"
	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/policy"
)

// EnvironmentBuildPath builds a pinned environment (admin only).
const EnvironmentBuildPath = "/v1/environments/build"

// envBuildScript runs inside the build's sandbox, as the payload's uid:
// pip (hash-checked, wheels only) or npm ci (integrity-checked against the
// lockfile) installs into /workspace/out, with network only to the one
// index or registry the egress proxy was narrowed to, or none. Install
// scripts are untrusted code: they run here, never as root on the host.
// The result is tarred with fixed owners, modes and times and no
// byte-code, so two builds of one lock give the same bytes; only files and
// directories travel (npm's node_modules/.bin links are left out: an
// environment is required, not run from a PATH). npm does not retry: a
// tarball that fails its integrity check would otherwise be fetched again
// with back-off for minutes before the build fails.
const envBuildScript = `import json, os, subprocess, sys, tarfile
cfg = json.load(open("/workspace/build.json"))
ca = ["--cert", "/workspace/ca.pem"] if cfg.get("ca") else []
env = dict(os.environ)
if cfg["language"] == "python":
    src = ["--index-url", cfg["index"]] if cfg.get("index") else ["--no-index", "--find-links", "/workspace/wheels"]
    cmd = [sys.executable, "-m", "pip", "install", "--require-hashes", "--no-compile", "--no-cache-dir",
        "--disable-pip-version-check", "--no-warn-script-location", "--only-binary", ":all:",
        "--target", "/workspace/out", "-r", "/workspace/lock/requirements.txt"] + src + ca
else:
    env.update(npm_config_cache="/tmp/npm-cache", npm_config_update_notifier="false", npm_config_fund="false",
        npm_config_audit="false", npm_config_loglevel="warn", npm_config_fetch_retries="0")
    if cfg.get("ca"):
        env["NODE_EXTRA_CA_CERTS"] = "/workspace/ca.pem"
    cmd = ["npm", "ci", "--registry", cfg["registry"]]
r = subprocess.run(cmd, cwd="/workspace/out" if cfg["language"] == "javascript" else "/workspace", env=env)
if r.returncode != 0:
    sys.exit(r.returncode)
def norm(ti):
    ti.uid = ti.gid = 0; ti.uname = ti.gname = ""; ti.mtime = 0
    if ti.isdir(): ti.mode = 0o755
    elif ti.isfile(): ti.mode = 0o755 if ti.mode & 0o111 else 0o644
    else: raise SystemExit("refusing %s: only files and directories" % ti.name)
    return ti
with tarfile.open("/workspace/env.tar", "w", format=tarfile.PAX_FORMAT) as t:
    for root, dirs, files in os.walk("/workspace/out"):
        dirs.sort()
        for n in sorted(dirs) + sorted(files):
            p = os.path.join(root, n)
            if os.path.islink(p) and os.path.basename(root) == ".bin":
                continue
            t.add(p, arcname=os.path.relpath(p, "/workspace/out"), recursive=False, filter=norm)
`

// buildCtxKey carries an environment build's exec id and narrowed proxy
// from handleEnvironmentBuild into serveExec and startEgress.
type buildCtxKey struct{}

type buildCtx struct {
	execID string
	proxy  *egress.Proxy // nil: the build has no network
}

// execIDFor returns the exec id an environment build fixed in advance (its
// env_build record is written under it), else a new one.
func execIDFor(ctx context.Context) string {
	if b, ok := ctx.Value(buildCtxKey{}).(buildCtx); ok && b.execID != "" {
		return b.execID
	}
	return newExecID()
}

// egressProxyFor is the proxy an egress exec gets: an environment build's
// narrowed one (its one index or registry), else the operator's.
func (s *Server) egressProxyFor(ctx context.Context) *egress.Proxy {
	if b, ok := ctx.Value(buildCtxKey{}).(buildCtx); ok && b.proxy != nil {
		return b.proxy
	}
	return s.egress.proxy
}

// handleEnvironmentBuild serves POST /v1/environments/build (admins only):
// it checks the lock (policy.PlanEnvironmentBuild), records the build
// (env_build: the lock's SHA-256 and its packages), and runs the install
// as an ordinary exec of the admin — accept, decide (the caller needs
// egress permission for an index or registry), launch, reap — whose
// network, if any, reaches only the index's or registry's host:port. The
// answer is that exec's result; registering the tree is root's job on the
// host (sandboxctl env build), never the supervisor's.
func (s *Server) handleEnvironmentBuild(w http.ResponseWriter, r *http.Request) {
	caller, _ := callerFrom(r.Context())
	body, apiE := readBody(w, r, s.cfg.MaxBodyBytes)
	var req api.EnvironmentBuildRequest
	if apiE == nil {
		apiE = decodeStrict(body, &req)
	}
	var plan policy.BuildPlan
	if apiE == nil {
		var err error
		if plan, err = policy.PlanEnvironmentBuild(req); err != nil {
			apiE = toAPI(err)
		}
	}
	b := buildCtx{execID: newExecID()}
	if apiE == nil && plan.HostPort != "" {
		b.proxy, apiE = s.narrowEgress(plan.HostPort)
	}
	var ex api.ExecRequest
	if apiE == nil {
		ex, apiE = s.buildExecRequest(req, plan)
	}
	if apiE != nil {
		writeError(w, apiE)
		return
	}
	sum := sha256Hex([]byte(req.Lock))
	f := &facts.EnvBuild{Name: req.Name, Language: req.Language, LockSHA256: sum, Source: plan.Source}
	for _, p := range plan.Packages {
		f.Packages = append(f.Packages, facts.Package{Name: p.Name, Version: p.Version})
	}
	if plan.HostPort != "" {
		f.Egress = []string{plan.HostPort}
	}
	rec := audit.Record{Time: time.Now().UTC(), ExecID: b.execID, Step: facts.StepEnvBuild, Source: "supervisor",
		CallerUID: caller.UID, CallerGID: caller.GID, CallerPID: caller.PID, Caller: caller.ID(), OK: true, Facts: f}
	if err := s.writeAudit(rec); err != nil {
		s.auditFailed(w, s.log, err)
		return
	}
	s.log.Info("environment build", "exec_id", b.execID, "name", req.Name, "language", req.Language,
		"lock_sha256", sum, "packages", len(plan.Packages), "egress", plan.HostPort)
	exBody, err := json.Marshal(ex)
	if err != nil {
		writeError(w, toAPI(err))
		return
	}
	r2 := r.Clone(context.WithValue(r.Context(), buildCtxKey{}, b))
	r2.Body, r2.ContentLength = io.NopCloser(bytes.NewReader(exBody)), int64(len(exBody))
	s.serveExec(w, r2, nil)
}

// narrowEgress is the build's proxy: the operator's, narrowed to hostPort.
func (s *Server) narrowEgress(hostPort string) (*egress.Proxy, *APIError) {
	if s.egress == nil {
		return nil, toAPI(errdefs.New(errdefs.ErrForbidden, fmt.Sprintf("this build needs network to %s, but this supervisor runs no egress proxy", hostPort),
			"restart sandboxd with --egress-allow "+hostPort+" and --egress-allow-uid for the building admin, or build python from --find-links", nil))
	}
	p, err := s.egress.proxy.Narrow([]string{hostPort})
	if err != nil {
		return nil, toAPI(err)
	}
	return p, nil
}

// buildConfig is build.json, what envBuildScript reads: the language, where
// packages come from (a python index, else the staged wheels; an npm
// registry) and whether ca.pem is staged.
type buildConfig struct {
	Language string `json:"language"`
	CA       bool   `json:"ca"`
	Index    string `json:"index,omitempty"`
	Registry string `json:"registry,omitempty"`
}

// buildExecRequest is the build's exec: the script, the lock and its
// inputs staged in the workspace, env.tar collected.
func (s *Server) buildExecRequest(req api.EnvironmentBuildRequest, plan policy.BuildPlan) (api.ExecRequest, *APIError) {
	cfg := buildConfig{Language: req.Language, CA: req.CAPEM != ""}
	b64 := base64.StdEncoding.EncodeToString
	var files []api.ExecFile
	if req.Language == "python" {
		cfg.Index = req.Index
		files = append(files, api.ExecFile{Path: "lock/requirements.txt", ContentBase64: b64([]byte(req.Lock))})
		for _, f := range req.Files {
			if strings.Contains(f.Path, "/") || !strings.HasSuffix(f.Path, ".whl") {
				return api.ExecRequest{}, apiErr(api.CodeInvalidArgument, fmt.Sprintf("files: %q: want a wheel's file name (NAME.whl, no directory)", f.Path))
			}
			files = append(files, api.ExecFile{Path: "wheels/" + f.Path, ContentBase64: f.ContentBase64})
		}
	} else {
		cfg.Registry = plan.Source
		files = append(files, api.ExecFile{Path: "out/package-lock.json", ContentBase64: b64([]byte(req.Lock))},
			api.ExecFile{Path: "out/package.json", ContentBase64: b64(plan.PackageJSON)})
	}
	if req.CAPEM != "" {
		files = append(files, api.ExecFile{Path: "ca.pem", ContentBase64: b64([]byte(req.CAPEM))})
	}
	cj, _ := json.Marshal(cfg)
	files = append(files, api.ExecFile{Path: "build.json", ContentBase64: b64(cj)})
	timeout := req.TimeoutMS
	if timeout == nil {
		t := s.liveConfig().ExecTimeoutMaxMS
		timeout = &t
	}
	ex := api.ExecRequest{Language: "python", Code: envBuildScript, Files: files, TimeoutMS: timeout, Artifacts: []string{"env.tar"}}
	if _, ok := s.cfg.Environments.Lookup("minimal"); ok {
		ex.Environment = "minimal" // the host's bare python: nothing of another environment on its path
	}
	if plan.HostPort != "" {
		ex.Network = api.NetworkEgress
	}
	return ex, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// environmentRoutes adds the environment endpoints.
func (s *Server) environmentRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/environments", s.handleEnvironments)
	mux.Handle("/v1/environments", methodNotAllowedHandler("GET, HEAD"))
	mux.HandleFunc("POST "+EnvironmentBuildPath, s.adminOnly(s.handleEnvironmentBuild))
	mux.Handle(EnvironmentBuildPath, methodNotAllowedHandler("POST"))
}
