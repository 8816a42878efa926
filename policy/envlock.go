package policy

import (
	"bytes"
	"encoding/json"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/sandboxd/sandboxd/api"
)

// MaxLockBytes bounds a lock an environment build accepts.
const MaxLockBytes = 1 << 20

// pinRe is one exact pin with at least one sha256 hash, as pip
// --require-hashes wants it (continuation lines are joined first).
var pinRe = regexp.MustCompile(`^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!_-]+)( +--hash=sha256:[0-9a-f]{64})+$`)

// PythonLock checks a requirements lock for an environment build: exact
// pins with sha256 hashes only (anything else — a range, an option line, a
// URL, a pin without a hash — is refused before anything runs, so pip's
// --require-hashes is the second check, not the only one). It returns the
// pinned packages, sorted.
func PythonLock(lock []byte) ([]api.Package, error) {
	if len(lock) > MaxLockBytes {
		return nil, invalid("requirements: %d bytes, at most %d", len(lock), MaxLockBytes)
	}
	text := strings.ReplaceAll(string(lock), "\\\n", " ")
	var out []api.Package
	for i, line := range strings.Split(text, "\n") {
		line = strings.Join(strings.Fields(line), " ")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := pinRe.FindStringSubmatch(line)
		if m == nil {
			return nil, invalid("requirements line %d %q: want NAME==VERSION --hash=sha256:<hex> (exact pins with hashes only)", i+1, trunc(line))
		}
		out = append(out, api.Package{Name: m[1], Version: m[2]})
	}
	if len(out) == 0 {
		return nil, invalid("requirements: no pins")
	}
	return sortPackages(out), nil
}

// npmLock is the part of a package-lock.json (lockfileVersion 2 or 3) an
// environment build reads.
type npmLock struct {
	LockfileVersion int                        `json:"lockfileVersion"`
	Packages        map[string]json.RawMessage `json:"packages"`
}

type npmEntry struct {
	Name                 string            `json:"name"`
	Version              string            `json:"version"`
	Resolved             string            `json:"resolved"`
	Integrity            string            `json:"integrity"`
	Link                 bool              `json:"link"`
	Dependencies         map[string]string `json:"dependencies"`
	DevDependencies      map[string]string `json:"devDependencies"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
}

var (
	semverRe    = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	integrityRe = regexp.MustCompile(`^sha(512|384|256)-[A-Za-z0-9+/]+=*$`)
	npmNameRe   = regexp.MustCompile(`^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]*$`)
)

// NPMLock checks a package-lock.json for an environment build: lockfile
// version 2 or 3, and every installed package an exact version fetched
// from an https tarball with an integrity hash (sha256/384/512; npm ci
// checks every tarball against it). Links, git and file dependencies, and
// sha1 integrity are refused. It returns the packages, sorted, and the
// package.json npm ci needs beside the lock (the lock's own root entry).
func NPMLock(lock []byte) ([]api.Package, []byte, error) {
	if len(lock) > MaxLockBytes {
		return nil, nil, invalid("lockfile: %d bytes, at most %d", len(lock), MaxLockBytes)
	}
	var l npmLock
	if err := json.Unmarshal(lock, &l); err != nil {
		return nil, nil, invalid("lockfile: not JSON: %v", err)
	}
	if l.LockfileVersion != 2 && l.LockfileVersion != 3 {
		return nil, nil, invalid("lockfile: lockfileVersion %d; want 2 or 3 (npm 7 or later)", l.LockfileVersion)
	}
	var root npmEntry
	var out []api.Package
	for key, raw := range l.Packages {
		var e npmEntry
		dec := json.NewDecoder(bytes.NewReader(raw))
		if err := dec.Decode(&e); err != nil {
			return nil, nil, invalid("lockfile: packages[%q]: %v", trunc(key), err)
		}
		if key == "" {
			root = e
			continue
		}
		p, err := npmPackage(key, e)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, nil, invalid("lockfile: no packages")
	}
	pj, err := json.Marshal(packageJSON{Name: "sandboxd-environment", Version: "0.0.0", Private: true,
		Dependencies: root.Dependencies, DevDependencies: root.DevDependencies, OptionalDependencies: root.OptionalDependencies})
	if err != nil {
		return nil, nil, invalid("lockfile: %v", err)
	}
	return sortPackages(out), pj, nil
}

// npmPackage checks one installed entry of a lockfile.
func npmPackage(key string, e npmEntry) (api.Package, error) {
	i := strings.LastIndex(key, "node_modules/")
	if i < 0 || (i > 0 && key[i-1] != '/') {
		return api.Package{}, invalid("lockfile: packages[%q]: not below node_modules/ (a workspace or a local folder)", trunc(key))
	}
	name := key[i+len("node_modules/"):]
	switch {
	case e.Link:
		return api.Package{}, invalid("lockfile: %s is a link: only registry packages", trunc(name))
	case !npmNameRe.MatchString(name):
		return api.Package{}, invalid("lockfile: %q is not an npm package name", trunc(name))
	case !semverRe.MatchString(e.Version):
		return api.Package{}, invalid("lockfile: %s version %q: want an exact version", name, trunc(e.Version))
	case !integrityRe.MatchString(e.Integrity):
		return api.Package{}, invalid("lockfile: %s@%s has no sha256/384/512 integrity (%q)", name, e.Version, trunc(e.Integrity))
	}
	u, err := url.Parse(e.Resolved)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return api.Package{}, invalid("lockfile: %s@%s resolved %q: want an https registry tarball", name, e.Version, trunc(e.Resolved))
	}
	return api.Package{Name: name, Version: e.Version}, nil
}

// sortPackages sorts by name, then version, and drops duplicates (npm
// installs one version several times in nested node_modules).
func sortPackages(p []api.Package) []api.Package {
	sort.Slice(p, func(i, j int) bool {
		if p[i].Name != p[j].Name {
			return p[i].Name < p[j].Name
		}
		return p[i].Version < p[j].Version
	})
	out := p[:0]
	for i, x := range p {
		if i == 0 || x != p[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func trunc(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

// environmentNameRe is an environment name, as the helper config accepts it.
var environmentNameRe = regexp.MustCompile(`^[a-z0-9._-]{1,64}$`)

// DefaultNPMRegistry is the registry a javascript build uses when the
// request names none.
const DefaultNPMRegistry = "https://registry.npmjs.org/"

// BuildPlan is what policy made of an environment build request: the
// lock's packages, where they come from, and the one destination the
// build's sandbox may reach ("" : no network).
type BuildPlan struct {
	Packages    []api.Package
	PackageJSON []byte // javascript: written beside the lock for npm ci
	Source      string // the index or registry URL, or "find-links"
	HostPort    string // host:port for the egress proxy, or ""
}

// PlanEnvironmentBuild checks an environment build request (pure): the
// name, the language, the lock (PythonLock / NPMLock), and the source. A
// python build takes either an index URL (then network egress to its host
// only) or staged wheels (no network), never both; a javascript build
// takes a registry URL (default the npm registry). Only https URLs: the
// egress proxy tunnels TLS and checks its SNI.
func PlanEnvironmentBuild(req api.EnvironmentBuildRequest) (BuildPlan, error) {
	var p BuildPlan
	if !environmentNameRe.MatchString(req.Name) || strings.Trim(req.Name, ".") == "" {
		return p, invalid("environment name %q: want 1-64 of [a-z0-9._-]", trunc(req.Name))
	}
	var err error
	switch req.Language {
	case "python":
		if req.Registry != "" {
			return p, invalid("registry is for javascript builds; python takes index")
		}
		if (req.Index == "") == (len(req.Files) == 0) {
			return p, invalid("a python build takes either index (a PEP 503 URL) or files (the wheels to install from), not both or neither")
		}
		if p.Packages, err = PythonLock([]byte(req.Lock)); err != nil {
			return p, err
		}
		p.Source = "find-links"
		if req.Index != "" {
			p.Source, p.HostPort, err = httpsHost("index", req.Index)
		}
	case "javascript":
		if req.Index != "" || len(req.Files) > 0 {
			return p, invalid("a javascript build takes registry and the lockfile only")
		}
		if p.Packages, p.PackageJSON, err = NPMLock([]byte(req.Lock)); err != nil {
			return p, err
		}
		reg := req.Registry
		if reg == "" {
			reg = DefaultNPMRegistry
		}
		p.Source, p.HostPort, err = httpsHost("registry", reg)
	default:
		return p, invalid("language %q: environments are built for python or javascript", trunc(req.Language))
	}
	return p, err
}

// httpsHost checks an index or registry URL and returns it and its
// host:port.
func httpsHost(what, raw string) (string, string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Hostname() == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", invalid("%s %q: want an https:// URL without credentials, query or fragment", what, trunc(raw))
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	return u.String(), strings.ToLower(u.Hostname()) + ":" + port, nil
}

// packageJSON is the package.json written beside a javascript environment's
// lock for `npm ci`: the lock's root dependencies under a fixed name. Its
// members are in sorted order, the bytes a map of them gave before.
type packageJSON struct {
	Dependencies         map[string]string `json:"dependencies"`
	DevDependencies      map[string]string `json:"devDependencies"`
	Name                 string            `json:"name"`
	OptionalDependencies map[string]string `json:"optionalDependencies"`
	Private              bool              `json:"private"`
	Version              string            `json:"version"`
}
