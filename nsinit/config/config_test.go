package config

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/internal/testutil"
)

const (
	testWS      = "/var/lib/sandboxd/workspaces"
	testShim    = "/usr/libexec/sandboxd/sandboxd-exec"
	testProfile = "/etc/sandboxd/payload.json"
	otherUID    = 65534 // nobody
)

func defaultConfig() Config { return Default(testWS, testShim, testProfile) }

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDefaultIsValid(t *testing.T) {
	c := defaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatalf("Default config does not validate: %v", err)
	}
	if c.Bwrap != "/usr/bin/bwrap" || c.Shim != testShim || c.WorkspaceRoot != testWS || c.PayloadProfile != testProfile {
		t.Fatalf("Default did not take its arguments: %+v", c)
	}
	for _, name := range []string{"python", "javascript"} {
		rt, ok := c.Runtimes[name]
		if !ok {
			t.Fatalf("Default lacks runtime %q", name)
		}
		// The code never travels on argv: argv is world-readable in /proc.
		for _, a := range rt.Argv {
			if strings.Contains(a, "print(") {
				t.Errorf("runtime %s argv carries code: %q", name, a)
			}
		}
	}
	if strings.Contains(c.Runtimes["python"].Argv[2], "main.py") != true {
		t.Errorf("python bootstrap does not run %s/main.py: %q", SandboxDir, c.Runtimes["python"].Argv[2])
	}
	if _, ok := c.RlimitMax["RLIMIT_CORE"]; ok {
		t.Errorf("RlimitMax caps RLIMIT_CORE, which is always 0")
	}
	// Two calls return independent values (no shared slices or maps).
	a, b := defaultConfig(), defaultConfig()
	a.ROBinds[0] = "/mutated"
	a.Runtimes["python"] = Runtime{}
	if b.ROBinds[0] == "/mutated" || len(b.Runtimes["python"].Argv) == 0 {
		t.Fatal("Default shares state between calls")
	}
}

func TestDefaultRoundTripsThroughParse(t *testing.T) {
	want := defaultConfig()
	got, err := Parse(mustJSON(t, want))
	if err != nil {
		t.Fatalf("Parse(Default): %v", err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Fatalf("round trip changed the config:\n got %+v\nwant %+v", *got, want)
	}
}

func TestParseStrict(t *testing.T) {
	valid := string(mustJSON(t, defaultConfig()))
	withField := func(path []string, value any) string {
		var m map[string]any
		if err := json.Unmarshal([]byte(valid), &m); err != nil {
			t.Fatal(err)
		}
		cur := m
		for _, k := range path[:len(path)-1] {
			cur = cur[k].(map[string]any)
		}
		cur[path[len(path)-1]] = value
		return string(mustJSON(t, m))
	}
	tests := []struct {
		name    string
		raw     string
		wantErr string
	}{
		{"empty", "", "decode helper config"},
		{"null", "null", "helper config"}, // decodes to the zero Config, which Validate refuses
		{"array", "[]", "decode helper config"},
		{"unknown top-level field", withField([]string{"bwrap_args"}, []string{"--bind", "/", "/"}), "unknown field"},
		{"unknown field in runtime", withField([]string{"runtimes", "python", "env"}, []string{"A=1"}), "unknown field"},
		{"unknown field in symlink", func() string {
			var m map[string]any
			_ = json.Unmarshal([]byte(valid), &m)
			m["symlinks"] = []any{map[string]any{"target": "usr/bin", "path": "/bin", "mode": 1}}
			return string(mustJSON(t, m))
		}(), "unknown field"},
		{"trailing object", valid + valid, "trailing data"},
		{"trailing object after newline", valid + "\n{}", "trailing data"},
		{"trailing garbage", valid + "x", "trailing data"},
		{"trailing number", valid + " 0", "trailing data"},
		{"trailing string", valid + ` "x"`, "trailing data"},
		{"truncated", valid[:len(valid)-2], "decode helper config"},
		{"wrong type", withField([]string{"tmp_size_max_bytes"}, "1G"), "decode helper config"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.raw))
			if err == nil {
				t.Fatalf("Parse accepted %.80q", tc.raw)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Parse error %q does not contain %q", err, tc.wantErr)
			}
		})
	}
	t.Run("trailing whitespace", func(t *testing.T) {
		if _, err := Parse([]byte(valid + "\n\t \n")); err != nil {
			t.Fatalf("trailing whitespace refused: %v", err)
		}
	})
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(c *Config)
		wantErr string // empty: valid
	}{
		{"default", func(c *Config) {}, ""},
		// the four trust-defining paths
		{"bwrap relative", func(c *Config) { c.Bwrap = "usr/bin/bwrap" }, "bwrap"},
		{"bwrap bare name", func(c *Config) { c.Bwrap = "bwrap" }, "bwrap"},
		{"bwrap empty", func(c *Config) { c.Bwrap = "" }, "bwrap"},
		{"bwrap dotdot", func(c *Config) { c.Bwrap = "/usr/lib/../bin/bwrap" }, "bwrap"},
		{"bwrap dot", func(c *Config) { c.Bwrap = "/usr/./bin/bwrap" }, "bwrap"},
		{"bwrap double slash", func(c *Config) { c.Bwrap = "/usr//bin/bwrap" }, "bwrap"},
		{"bwrap trailing slash", func(c *Config) { c.Bwrap = "/usr/bin/bwrap/" }, "bwrap"},
		{"shim relative", func(c *Config) { c.Shim = "./sandboxd-exec" }, "shim"},
		{"shim unclean", func(c *Config) { c.Shim = "/usr/libexec/../sandboxd-exec" }, "shim"},
		{"workspace_root relative", func(c *Config) { c.WorkspaceRoot = "var/lib/sandboxd" }, "workspace_root"},
		{"workspace_root unclean", func(c *Config) { c.WorkspaceRoot = "/var/lib/sandboxd/" }, "workspace_root"},
		{"payload_profile relative", func(c *Config) { c.PayloadProfile = "payload.json" }, "payload_profile"},
		{"payload_profile unclean", func(c *Config) { c.PayloadProfile = "/etc/sandboxd/../sandboxd/payload.json" }, "payload_profile"},
		// tmp
		{"tmp zero", func(c *Config) { c.TmpSizeMaxBytes = 0 }, "tmp_size_max_bytes"},
		{"tmp negative", func(c *Config) { c.TmpSizeMaxBytes = -1 }, "tmp_size_max_bytes"},
		// base env
		{"base_env without =", func(c *Config) { c.BaseEnv = append(c.BaseEnv, "PATH") }, "base_env"},
		{"base_env empty name", func(c *Config) { c.BaseEnv = append(c.BaseEnv, "=x") }, "base_env"},
		{"base_env empty entry", func(c *Config) { c.BaseEnv = append(c.BaseEnv, "") }, "base_env"},
		{"base_env empty value", func(c *Config) { c.BaseEnv = append(c.BaseEnv, "EMPTY=") }, ""},
		{"base_env nil", func(c *Config) { c.BaseEnv = nil }, ""},
		// binds and devices
		{"ro_bind root", func(c *Config) { c.ROBinds = append(c.ROBinds, "/") }, `bind "/"`},
		{"ro_bind relative", func(c *Config) { c.ROBinds = append(c.ROBinds, "usr") }, "bind"},
		{"ro_bind empty", func(c *Config) { c.ROBinds = append(c.ROBinds, "") }, "bind"},
		{"ro_bind trailing slash", func(c *Config) { c.ROBinds = append(c.ROBinds, "/usr/") }, "bind"},
		{"ro_bind dotdot", func(c *Config) { c.ROBinds = append(c.ROBinds, "/usr/../etc") }, "bind"},
		{"ro_bind dotdot to root", func(c *Config) { c.ROBinds = append(c.ROBinds, "/usr/..") }, "bind"},
		{"ro_bind option-like relative", func(c *Config) { c.ROBinds = append(c.ROBinds, "--bind") }, "bind"},
		{"device root", func(c *Config) { c.Devices = append(c.Devices, "/") }, "bind"},
		{"device relative", func(c *Config) { c.Devices = append(c.Devices, "dev/null") }, "bind"},
		{"device unclean", func(c *Config) { c.Devices = append(c.Devices, "/dev/../dev/null") }, "bind"},
		{"no binds", func(c *Config) { c.ROBinds, c.Devices = nil, nil }, ""},
		// symlinks
		{"symlink relative path", func(c *Config) { c.Symlinks = append(c.Symlinks, Symlink{Target: "usr/bin", Path: "bin"}) }, "symlink"},
		{"symlink empty target", func(c *Config) { c.Symlinks = append(c.Symlinks, Symlink{Path: "/x"}) }, "symlink"},
		{"symlink empty path", func(c *Config) { c.Symlinks = append(c.Symlinks, Symlink{Target: "x"}) }, "symlink"},
		// runtimes
		{"runtimes nil", func(c *Config) { c.Runtimes = nil }, "no runtimes"},
		{"runtimes empty", func(c *Config) { c.Runtimes = map[string]Runtime{} }, "no runtimes"},
		{"runtime empty argv", func(c *Config) { c.Runtimes["python"] = Runtime{CodeFile: "main.py"} }, "absolute argv[0]"},
		{"runtime relative argv0", func(c *Config) {
			c.Runtimes["python"] = Runtime{Argv: []string{"python3", "-c", "x"}, CodeFile: "main.py"}
		}, "absolute argv[0]"},
		{"runtime dot-relative argv0", func(c *Config) {
			c.Runtimes["python"] = Runtime{Argv: []string{"./python3"}, CodeFile: "main.py"}
		}, "absolute argv[0]"},
		{"runtime option argv0", func(c *Config) {
			c.Runtimes["python"] = Runtime{Argv: []string{"--bind", "/", "/"}, CodeFile: "main.py"}
		}, "absolute argv[0]"},
		{"code_file empty", func(c *Config) { c.Runtimes["node"] = Runtime{Argv: []string{"/usr/bin/node"}} }, "code_file"},
		{"code_file with slash", func(c *Config) {
			c.Runtimes["node"] = Runtime{Argv: []string{"/usr/bin/node"}, CodeFile: "a/main.js"}
		}, "code_file"},
		{"code_file absolute", func(c *Config) {
			c.Runtimes["node"] = Runtime{Argv: []string{"/usr/bin/node"}, CodeFile: "/etc/passwd"}
		}, "code_file"},
		{"code_file ../", func(c *Config) {
			c.Runtimes["node"] = Runtime{Argv: []string{"/usr/bin/node"}, CodeFile: "../main.js"}
		}, "code_file"},
		{"code_file NUL", func(c *Config) {
			c.Runtimes["node"] = Runtime{Argv: []string{"/usr/bin/node"}, CodeFile: "main\x00.js"}
		}, "code_file"},
		{"code_file env", func(c *Config) { c.Runtimes["node"] = Runtime{Argv: []string{"/usr/bin/node"}, CodeFile: "env"} }, "code_file"},
		{"code_file exec", func(c *Config) { c.Runtimes["node"] = Runtime{Argv: []string{"/usr/bin/node"}, CodeFile: "exec"} }, "code_file"},
		{"code_file Env is another name", func(c *Config) {
			c.Runtimes["node"] = Runtime{Argv: []string{"/usr/bin/node"}, CodeFile: "Env"}
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultConfig()
			tc.mutate(&c)
			err := c.Validate()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
			} else {
				if err == nil {
					t.Fatalf("Validate accepted %+v", c)
				}
				if !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate error %q does not contain %q", err, tc.wantErr)
				}
			}
			// Parse reaches the same verdict on the encoded form.
			if _, perr := Parse(mustJSON(t, c)); (perr == nil) != (err == nil) {
				t.Fatalf("Parse err = %v, Validate err = %v", perr, err)
			}
		})
	}
}

// rootDir makes a fresh directory directly under /tmp (root-owned, sticky,
// world-writable on every Debian host), whatever TMPDIR says, with mode.
func rootDir(t *testing.T, mode os.FileMode) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "sandboxd-config-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = os.Chmod(d, 0o700)
		_ = os.RemoveAll(d)
	})
	if err := os.Chmod(d, mode); err != nil {
		t.Fatal(err)
	}
	return d
}

func writeFile(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Explicit chmod: WriteFile's mode is filtered by the umask.
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	assertMode(t, path, mode)
}

func mkdir(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	assertMode(t, path, mode)
}

// assertMode guards the tests themselves: os.Chmod takes os.ModeSticky, not 0o1000.
func assertMode(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	const bits = os.ModePerm | os.ModeSticky | os.ModeSetuid | os.ModeSetgid
	if got := fi.Mode() & bits; got != mode&bits {
		t.Fatalf("%s has mode %v, want %v", path, got, mode&bits)
	}
}

func TestCheckRootOwnedNeedsAbsolutePath(t *testing.T) {
	for _, p := range []string{"", "etc/passwd", "./x", "../x"} {
		if err := CheckRootOwned(p); err == nil || !strings.Contains(err.Error(), "not absolute") {
			t.Errorf("CheckRootOwned(%q) = %v, want a not-absolute error", p, err)
		}
	}
}

func TestCheckRootOwnedMissing(t *testing.T) {
	err := CheckRootOwned("/nonexistent-sandboxd-test/x/y")
	if err == nil || !strings.Contains(err.Error(), "stat") {
		t.Fatalf("missing path: err = %v, want a stat error", err)
	}
}

func TestCheckRootOwnedSystemPaths(t *testing.T) {
	// Whoever runs the test: / and /usr belong to root on any Debian host.
	for _, p := range []string{"/", "/usr", "/usr/bin"} {
		if err := CheckRootOwned(p); err != nil {
			t.Errorf("CheckRootOwned(%q): %v", p, err)
		}
	}
	// /tmp itself is sticky but world-writable: as the checked path (not a
	// parent) it is refused.
	if err := CheckRootOwned("/tmp"); err == nil {
		t.Error("CheckRootOwned(/tmp) accepted a world-writable leaf")
	}
}

func TestCheckRootOwned(t *testing.T) {
	testutil.RequireRoot(t, "create root-owned files and chown")
	tests := []struct {
		name string
		// setup builds a tree under base (a root-owned 0755 dir below /tmp)
		// and returns the path to check.
		setup   func(t *testing.T, base string) string
		wantErr string // empty: accepted
	}{
		{"root file 0644 in root dir 0755", func(t *testing.T, base string) string {
			p := filepath.Join(base, "cfg.json")
			writeFile(t, p, 0o644)
			return p
		}, ""},
		{"root file 0600", func(t *testing.T, base string) string {
			p := filepath.Join(base, "cfg.json")
			writeFile(t, p, 0o600)
			return p
		}, ""},
		{"root file 0755 nested", func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "a"), 0o755)
			mkdir(t, filepath.Join(base, "a", "b"), 0o711)
			p := filepath.Join(base, "a", "b", "bwrap")
			writeFile(t, p, 0o755)
			return p
		}, ""},
		{"unclean path is cleaned", func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "a"), 0o755)
			writeFile(t, filepath.Join(base, "cfg.json"), 0o644)
			return base + "/a/../cfg.json"
		}, ""},
		{"file owned by another uid", func(t *testing.T, base string) string {
			p := filepath.Join(base, "cfg.json")
			writeFile(t, p, 0o644)
			chown(t, p, otherUID, 0)
			return p
		}, "owned by uid 65534"},
		{"file owned by root but another group is fine if not group-writable", func(t *testing.T, base string) string {
			p := filepath.Join(base, "cfg.json")
			writeFile(t, p, 0o644)
			chown(t, p, 0, otherUID)
			return p
		}, ""},
		{"group-writable file", func(t *testing.T, base string) string {
			p := filepath.Join(base, "cfg.json")
			writeFile(t, p, 0o664)
			return p
		}, "writable by group or others"},
		{"world-writable file", func(t *testing.T, base string) string {
			p := filepath.Join(base, "cfg.json")
			writeFile(t, p, 0o646)
			return p
		}, "writable by group or others"},
		{"sticky world-writable file", func(t *testing.T, base string) string {
			p := filepath.Join(base, "cfg.json")
			writeFile(t, p, os.ModeSticky|0o666)
			return p
		}, "writable by group or others"},
		{"symlink to a root-owned file", func(t *testing.T, base string) string {
			real := filepath.Join(base, "real.json")
			writeFile(t, real, 0o644)
			link := filepath.Join(base, "cfg.json")
			if err := os.Symlink(real, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is a symlink"},
		{"symlinked parent directory", func(t *testing.T, base string) string {
			mkdir(t, filepath.Join(base, "real"), 0o755)
			writeFile(t, filepath.Join(base, "real", "cfg.json"), 0o644)
			if err := os.Symlink("real", filepath.Join(base, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "link", "cfg.json")
		}, "is a symlink"},
		{"parent owned by another uid", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, 0o755)
			p := filepath.Join(d, "cfg.json")
			writeFile(t, p, 0o644)
			chown(t, d, otherUID, 0)
			return p
		}, "owned by uid 65534"},
		{"group-writable parent", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, 0o775)
			p := filepath.Join(d, "cfg.json")
			writeFile(t, p, 0o644)
			return p
		}, "writable by group or others"},
		{"world-writable non-sticky parent", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, 0o777)
			p := filepath.Join(d, "cfg.json")
			writeFile(t, p, 0o644)
			return p
		}, "writable by group or others"},
		{"world-writable non-sticky grandparent", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, 0o777)
			mkdir(t, filepath.Join(d, "e"), 0o755)
			p := filepath.Join(d, "e", "cfg.json")
			writeFile(t, p, 0o644)
			return p
		}, "writable by group or others"},
		{"sticky world-writable root-owned parent", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, os.ModeSticky|0o777)
			p := filepath.Join(d, "cfg.json")
			writeFile(t, p, 0o644)
			return p
		}, ""},
		{"root dir inside sticky world-writable parent", func(t *testing.T, base string) string {
			d := filepath.Join(base, "sticky")
			mkdir(t, d, os.ModeSticky|0o777)
			mkdir(t, filepath.Join(d, "etc"), 0o755)
			p := filepath.Join(d, "etc", "cfg.json")
			writeFile(t, p, 0o644)
			return p
		}, ""},
		{"other-owned file inside sticky parent", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, os.ModeSticky|0o777)
			p := filepath.Join(d, "cfg.json")
			writeFile(t, p, 0o644)
			chown(t, p, otherUID, 0)
			return p
		}, "owned by uid 65534"},
		{"sticky world-writable parent owned by another uid", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, os.ModeSticky|0o777)
			p := filepath.Join(d, "cfg.json")
			writeFile(t, p, 0o644)
			chown(t, d, otherUID, 0)
			return p
		}, "owned by uid 65534"},
		{"sticky world-writable dir as the checked path", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, os.ModeSticky|0o777)
			return d
		}, "writable by group or others"},
		{"sticky group-writable parent", func(t *testing.T, base string) string {
			d := filepath.Join(base, "d")
			mkdir(t, d, os.ModeSticky|0o775)
			p := filepath.Join(d, "cfg.json")
			writeFile(t, p, 0o644)
			return p
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := rootDir(t, 0o755)
			p := tc.setup(t, base)
			err := CheckRootOwned(p)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("CheckRootOwned(%q): %v", p, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("CheckRootOwned(%q) accepted", p)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("CheckRootOwned(%q) = %q, want it to contain %q", p, err, tc.wantErr)
			}
		})
	}
}

func chown(t *testing.T, path string, uid, gid int) {
	t.Helper()
	if err := os.Lchown(path, uid, gid); err != nil {
		t.Fatalf("chown %s: %v", path, err)
	}
}

func TestLoad(t *testing.T) {
	testutil.RequireRoot(t, "create root-owned files and chown")
	valid := mustJSON(t, defaultConfig())

	t.Run("root-owned valid config", func(t *testing.T) {
		p := filepath.Join(rootDir(t, 0o755), "nsinit.json")
		if err := os.WriteFile(p, valid, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Load(p)
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if want := defaultConfig(); !reflect.DeepEqual(*c, want) {
			t.Fatalf("Load = %+v, want %+v", *c, want)
		}
	})
	t.Run("config another uid owns", func(t *testing.T) {
		p := filepath.Join(rootDir(t, 0o755), "nsinit.json")
		if err := os.WriteFile(p, valid, 0o644); err != nil {
			t.Fatal(err)
		}
		chown(t, p, otherUID, otherUID)
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "not root") {
			t.Fatalf("Load of a file uid %d owns: err = %v", otherUID, err)
		}
	})
	t.Run("config in a world-writable dir", func(t *testing.T) {
		p := filepath.Join(rootDir(t, 0o777), "nsinit.json")
		if err := os.WriteFile(p, valid, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil {
			t.Fatal("Load accepted a config in a world-writable dir")
		}
	})
	t.Run("oversized", func(t *testing.T) {
		p := filepath.Join(rootDir(t, 0o755), "nsinit.json")
		big := append(append([]byte{}, valid...), bytes.Repeat([]byte(" "), MaxConfigSize)...)
		if err := os.WriteFile(p, big, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "larger than") {
			t.Fatalf("Load of a %d-byte config: err = %v", len(big), err)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		p := filepath.Join(rootDir(t, 0o755), "nsinit.json")
		if err := os.WriteFile(p, []byte(`{"bwrap":"bwrap"}`), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil {
			t.Fatal("Load accepted an invalid config")
		}
	})
	t.Run("missing", func(t *testing.T) {
		if _, err := Load(filepath.Join(rootDir(t, 0o755), "nope.json")); err == nil {
			t.Fatal("Load accepted a missing file")
		}
	})
}

func TestDefaultPathIsTrusted(t *testing.T) {
	if !filepath.IsAbs(DefaultPath) || filepath.Clean(DefaultPath) != DefaultPath {
		t.Fatalf("DefaultPath %q is not a clean absolute path", DefaultPath)
	}
}

// Regression: json.Decoder.More is false before a stray ']' or '}'.
func TestParseRefusesTrailingBrackets(t *testing.T) {
	c := Default("/var/lib/sandboxd/workspaces", "/usr/libexec/sandboxd/sandboxd-exec", "/etc/sandboxd/payload.json")
	raw, _ := json.Marshal(c)
	for _, tr := range []string{"]", "}", "}}]"} {
		if _, err := Parse(append(append([]byte{}, raw...), tr...)); err == nil {
			t.Errorf("Parse accepted a config followed by %q", tr)
		}
	}
}

// Regression: "." and ".." would bind the code over /run/sandboxd or /run.
func TestValidateRefusesDotCodeFile(t *testing.T) {
	for _, name := range []string{".", ".."} {
		c := Default("/var/lib/sandboxd/workspaces", "/usr/libexec/sandboxd/sandboxd-exec", "/etc/sandboxd/payload.json")
		c.Runtimes["python"] = Runtime{Argv: []string{"/usr/bin/python3"}, CodeFile: name}
		if err := c.Validate(); err == nil {
			t.Errorf("code_file %q accepted: it is not a plain file name", name)
		}
	}
}
