package policy

import (
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/nsinit/spec"
)

func envMap(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func newFS() *flag.FlagSet {
	fs := flag.NewFlagSet("sandboxd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

func TestDefaults(t *testing.T) {
	c := Defaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"socket", c.SocketPath, "/run/sandboxd/sandboxd.sock"},
		{"state dir", c.StateDir, "/var/lib/sandboxd"},
		{"audit log", c.AuditLog(), "/var/lib/sandboxd/audit/audit.log"},
		{"exec timeout", c.ExecTimeoutMS, int64(30000)},
		{"exec timeout max", c.ExecTimeoutMaxMS, int64(60000)},
		{"exec timeout cap", c.ExecTimeoutCapMS, int64(600000)},
		{"output limit", c.OutputLimitBytes, int64(262144)},
		{"max body", c.MaxBodyBytes, int64(8 << 20)},
		{"max code", c.MaxCodeBytes, int64(1 << 20)},
		{"tmp", c.TmpSizeBytes, int64(256 << 20)},
		{"memory", c.MemoryBytes, int64(2 << 30)},
		{"pids", c.Pids, int64(256)},
		{"cpus", c.CPUs, 1.0},
		{"nofile", c.NoFile, uint64(1024)},
		{"quota", c.WorkspaceQuotaBytes, int64(1024 << 20)},
		{"max sessions", c.MaxSessions, 16},
		{"max execs", c.MaxConcurrentExecs, 4},
		{"idle ttl", c.IdleTTLSeconds, int64(1800)},
		{"idle ttl cap", c.IdleTTLCapSeconds, int64(86400)},
		{"helper", c.HelperPath, "/usr/local/libexec/sandboxd/sandboxd-nsinit"},
		{"helper config", c.HelperConfigPath, "/etc/sandboxd/nsinit.json"},
		{"audit fsync", c.AuditFsync, true},
	}
	for _, ck := range checks {
		if !reflect.DeepEqual(ck.got, ck.want) {
			t.Errorf("%s = %v, want %v", ck.name, ck.got, ck.want)
		}
	}
}

func TestAuditLogFollowsStateDir(t *testing.T) {
	c := Defaults()
	c.StateDir = "/srv/sbx"
	if got := c.AuditLog(); got != "/srv/sbx/audit/audit.log" {
		t.Fatalf("AuditLog = %q", got)
	}
	c.AuditLogPath = "/var/log/sandboxd/audit.log"
	if got := c.AuditLog(); got != "/var/log/sandboxd/audit.log" {
		t.Fatalf("AuditLog = %q", got)
	}
}

func TestEveryFlagHasEnv(t *testing.T) {
	fs := newFS()
	cfg := Defaults()
	RegisterFlags(fs, &cfg)
	want := []string{"socket", "socket-group", "allow-uid", "allow-gid", "state-dir", "audit-log",
		"output-limit", "exec-timeout-cap", "max-body-bytes", "helper", "helper-config"}
	for _, name := range want {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("flag --%s is missing", name)
			continue
		}
		if !strings.Contains(f.Usage, EnvName(name)) {
			t.Errorf("flag --%s usage does not name %s", name, EnvName(name))
		}
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n != len(settings()) {
		t.Fatalf("%d flags for %d settings", n, len(settings()))
	}
	if EnvName("state-dir") != "SANDBOXD_STATE_DIR" || EnvName("socket") != "SANDBOXD_SOCKET" {
		t.Fatal("EnvName does not make SANDBOXD_UPPER_SNAKE")
	}
}

func TestLoadPrecedence(t *testing.T) {
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		check func(t *testing.T, c Config)
	}{
		{"defaults", nil, nil, func(t *testing.T, c Config) {
			if c.SocketPath != DefaultSocketPath || c.AllowUIDs != nil {
				t.Errorf("got %q %v", c.SocketPath, c.AllowUIDs)
			}
		}},
		{"env over default", map[string]string{"SANDBOXD_SOCKET": "/tmp/e.sock", "SANDBOXD_STATE_DIR": "/srv/s"}, nil, func(t *testing.T, c Config) {
			if c.SocketPath != "/tmp/e.sock" || c.StateDir != "/srv/s" || c.AuditLog() != "/srv/s/audit/audit.log" {
				t.Errorf("got %q %q %q", c.SocketPath, c.StateDir, c.AuditLog())
			}
		}},
		{"flag over env", map[string]string{"SANDBOXD_SOCKET": "/tmp/e.sock"}, []string{"--socket", "/tmp/f.sock"}, func(t *testing.T, c Config) {
			if c.SocketPath != "/tmp/f.sock" {
				t.Errorf("got %q", c.SocketPath)
			}
		}},
		{"empty env is unset", map[string]string{"SANDBOXD_SOCKET": ""}, nil, func(t *testing.T, c Config) {
			if c.SocketPath != DefaultSocketPath {
				t.Errorf("got %q", c.SocketPath)
			}
		}},
		{"uid list comma and repeat", nil, []string{"--allow-uid", "1000,1001", "--allow-uid=1002", "--allow-gid", "50"}, func(t *testing.T, c Config) {
			if !reflect.DeepEqual(c.AllowUIDs, []int{1000, 1001, 1002}) || !reflect.DeepEqual(c.AllowGIDs, []int{50}) {
				t.Errorf("got %v %v", c.AllowUIDs, c.AllowGIDs)
			}
		}},
		{"uid flag replaces env list", map[string]string{"SANDBOXD_ALLOW_UID": "1,2"}, []string{"--allow-uid", "3"}, func(t *testing.T, c Config) {
			if !reflect.DeepEqual(c.AllowUIDs, []int{3}) {
				t.Errorf("got %v", c.AllowUIDs)
			}
		}},
		{"uid env alone", map[string]string{"SANDBOXD_ALLOW_UID": "1, 2"}, nil, func(t *testing.T, c Config) {
			if !reflect.DeepEqual(c.AllowUIDs, []int{1, 2}) {
				t.Errorf("got %v", c.AllowUIDs)
			}
		}},
		{"sizes with units", map[string]string{"SANDBOXD_MEMORY": "512MiB"}, []string{"--output-limit", "1KiB", "--max-body-bytes=16M", "--tmp-size", "1g"}, func(t *testing.T, c Config) {
			if c.MemoryBytes != 512<<20 || c.OutputLimitBytes != 1024 || c.MaxBodyBytes != 16<<20 || c.TmpSizeBytes != 1<<30 {
				t.Errorf("got %d %d %d %d", c.MemoryBytes, c.OutputLimitBytes, c.MaxBodyBytes, c.TmpSizeBytes)
			}
		}},
		{"numbers", map[string]string{"SANDBOXD_CPUS": "0.5", "SANDBOXD_EXEC_TIMEOUT_CAP": "120000"}, []string{"--pids", "64", "--nofile", "256", "--max-concurrent-execs", "2", "--audit-fsync=false"}, func(t *testing.T, c Config) {
			if c.CPUs != 0.5 || c.ExecTimeoutCapMS != 120000 || c.Pids != 64 || c.NoFile != 256 || c.MaxConcurrentExecs != 2 || c.AuditFsync {
				t.Errorf("got %+v", c)
			}
		}},
		{"helper paths", map[string]string{"SANDBOXD_HELPER_CONFIG": "/etc/x.json"}, []string{"--helper", "/opt/nsinit"}, func(t *testing.T, c Config) {
			if c.HelperPath != "/opt/nsinit" || c.HelperConfigPath != "/etc/x.json" {
				t.Errorf("got %q %q", c.HelperPath, c.HelperConfigPath)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(newFS(), tc.args, envMap(tc.env))
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			tc.check(t, c)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name      string
		env       map[string]string
		args      []string
		wantErrIn []string
	}{
		{"bad env int", map[string]string{"SANDBOXD_PIDS": "many"}, nil, []string{"SANDBOXD_PIDS=\"many\"", "want an integer"}},
		{"bad env size and uid together", map[string]string{"SANDBOXD_MEMORY": "2TB", "SANDBOXD_ALLOW_UID": "bob"}, nil, []string{"SANDBOXD_MEMORY", "unknown unit", "SANDBOXD_ALLOW_UID", `"bob" is not a numeric id`}},
		{"bad flag", nil, []string{"--output-limit", "-1"}, []string{"flags:", "non-negative"}},
		{"unknown flag", nil, []string{"--nope"}, []string{"flags:", "nope"}},
		{"out of range", nil, []string{"--exec-timeout-cap", "0"}, []string{"--exec-timeout-cap: 0 ms is out of range"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(newFS(), tc.args, envMap(tc.env))
			if err == nil {
				t.Fatal("Load succeeded")
			}
			for _, w := range tc.wantErrIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name      string
		mut       func(c *Config)
		wantErrIn string
	}{
		{"relative socket", func(c *Config) { c.SocketPath = "s.sock" }, "--socket: \"s.sock\" is not an absolute path"},
		{"empty socket", func(c *Config) { c.SocketPath = "" }, "--socket: must be set"},
		{"socket too long", func(c *Config) { c.SocketPath = "/" + strings.Repeat("s", 107) }, "at most 107"},
		{"relative state dir", func(c *Config) { c.StateDir = "state" }, "--state-dir"},
		{"relative audit log", func(c *Config) { c.AuditLogPath = "audit.log" }, "--audit-log"},
		{"relative helper", func(c *Config) { c.HelperPath = "nsinit" }, "--helper:"},
		{"relative helper config", func(c *Config) { c.HelperConfigPath = "x.json" }, "--helper-config:"},
		{"negative uid", func(c *Config) { c.AllowUIDs = []int{-1} }, "--allow-uid: -1"},
		{"uid -1 as unsigned", func(c *Config) { c.AllowGIDs = []int{1<<32 - 1} }, "--allow-gid"},
		{"default above max", func(c *Config) { c.ExecTimeoutMS = 70000 }, "--exec-timeout: 70000 ms is out of range 1..60000"},
		{"max above cap", func(c *Config) { c.ExecTimeoutMaxMS = 700000 }, "--exec-timeout-max"},
		{"cap too large", func(c *Config) { c.ExecTimeoutCapMS = 1 << 40 }, "--exec-timeout-cap"},
		{"zero output", func(c *Config) { c.OutputLimitBytes = 0 }, "--output-limit"},
		{"huge output", func(c *Config) { c.OutputLimitBytes = 1 << 30 }, "--output-limit"},
		{"tiny body", func(c *Config) { c.MaxBodyBytes = 10 }, "--max-body-bytes"},
		{"code above spec", func(c *Config) { c.MaxCodeBytes = 4 << 20 }, "--max-code-bytes"},
		{"tiny tmp", func(c *Config) { c.TmpSizeBytes = 1 }, "--tmp-size"},
		{"tiny memory", func(c *Config) { c.MemoryBytes = 1 << 20 }, "--memory"},
		{"zero pids", func(c *Config) { c.Pids = 0 }, "--pids"},
		{"zero cpus", func(c *Config) { c.CPUs = 0 }, "--cpus"},
		{"tiny nofile", func(c *Config) { c.NoFile = 3 }, "--nofile"},
		{"tiny quota", func(c *Config) { c.WorkspaceQuotaBytes = 10 }, "--workspace-quota"},
		{"negative sessions", func(c *Config) { c.MaxSessions = -1 }, "--max-sessions"},
		{"zero execs", func(c *Config) { c.MaxConcurrentExecs = 0 }, "--max-concurrent-execs"},
		{"ttl above cap", func(c *Config) { c.IdleTTLSeconds = 90000 }, "--idle-ttl: 90000 s is out of range 1..86400"},
		{"zero ttl cap", func(c *Config) { c.IdleTTLCapSeconds = 0 }, "--idle-ttl-cap"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.mut(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.wantErrIn) {
				t.Fatalf("Validate = %v, want an error containing %q", err, tc.wantErrIn)
			}
		})
	}
	c := Defaults()
	c.Pids, c.NoFile = 0, 0
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "--pids") || !strings.Contains(err.Error(), "--nofile") {
		t.Fatalf("Validate should report every bad setting, got %v", err)
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"262144", 262144, true}, {"256KiB", 256 << 10, true}, {"256 kib", 256 << 10, true},
		{"1M", 1 << 20, true}, {"2GiB", 2 << 30, true}, {"10b", 10, true},
		{"", 0, false}, {"KiB", 0, false}, {"1.5G", 0, false}, {"-1", 0, false}, {"1TB", 0, false},
		{"99999999999G", 0, false},
	}
	for _, tc := range tests {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

// The code limit must fit in a launch spec, which carries the code.
func TestCodeLimitFitsLaunchSpec(t *testing.T) {
	if MaxCodeBytesLimit >= spec.MaxSize {
		t.Fatalf("MaxCodeBytesLimit %d leaves no room in spec.MaxSize %d", MaxCodeBytesLimit, spec.MaxSize)
	}
}

func TestValidateShares(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(c *Config)
		want string // "" = valid
	}{
		{"defaults", func(c *Config) {}, ""},
		{"session share above max", func(c *Config) { c.MaxSessionsPerCaller = c.MaxSessions + 1 }, "--max-sessions-per-caller"},
		{"session share negative", func(c *Config) { c.MaxSessionsPerCaller = -1 }, "--max-sessions-per-caller"},
		{"fewer sessions, automatic share", func(c *Config) { c.MaxSessions = 3 }, ""},
		{"sessions disabled", func(c *Config) { c.MaxSessions, c.MaxSessionsPerCaller = 0, 0 }, ""},
		{"queue share above max", func(c *Config) { c.MaxQueuedExecsPerCaller = c.MaxQueuedExecs + 1 }, "--max-queued-execs-per-caller"},
		{"no queue", func(c *Config) { c.MaxQueuedExecs, c.MaxQueuedExecsPerCaller = 0, 0 }, ""},
		{"explicit queue share", func(c *Config) { c.MaxQueuedExecsPerCaller = 3 }, ""},
		{"connection share above half", func(c *Config) { c.MaxConnectionsPerCaller = c.MaxConnections/2 + 1 }, "--max-connections-per-caller"},
		{"one connection", func(c *Config) { c.MaxConnections = 1 }, "--max-connections"},
		{"body budget below a body", func(c *Config) { c.CallerBodyBudget = c.MaxBodyBytes - 1 }, "--caller-body-budget"},
		{"negative retention", func(c *Config) { c.ArchiveRetention = -1 }, "--archive-retention"},
		{"negative archive budget", func(c *Config) { c.ArchiveCallerMaxBytes = -1 }, "--archive-caller-max-bytes"},
		{"negative audit retention", func(c *Config) { c.AuditRetentionFiles = -1 }, "--audit-retention-files"},
		{"admin backends", func(c *Config) { c.AdminArchiveBackends = []string{"local", "s3", "none"} }, ""},
		{"admin backend bogus", func(c *Config) { c.AdminArchiveBackends = []string{"local", "ftp"} }, "--admin-archive-backends"},
		{"admin endpoint", func(c *Config) { c.AdminS3Endpoints = []string{"https://s3.example:9000"} }, ""},
		{"admin endpoint with a path", func(c *Config) { c.AdminS3Endpoints = []string{"https://s3.example/x"} }, "--admin-s3-endpoint"},
		{"admin endpoint with a user", func(c *Config) { c.AdminS3Endpoints = []string{"http://u:p@s3.example"} }, "--admin-s3-endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.set(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v; want an error naming %s", err, tc.want)
			}
		})
	}
}

func TestDurationValue(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"30d", 30 * 24 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"0", 0, false},
		{"-1d", 0, true},
		{"xd", 0, true},
		{"soon", 0, true},
	} {
		var d time.Duration
		err := (*durationValue)(&d).Set(tc.in)
		if (err != nil) != tc.bad || (!tc.bad && d != tc.want) {
			t.Errorf("Set(%q) = %v, %v; want %v (error %v)", tc.in, d, err, tc.want, tc.bad)
		}
	}
	d := DefaultArchiveRetention
	if got := (*durationValue)(&d).String(); got != "30d" {
		t.Errorf("String() = %q; want 30d", got)
	}
}

func TestShares(t *testing.T) {
	for _, tc := range []struct{ set, limit, want int }{
		{0, 16, 8}, {0, 1, 1}, {0, 0, 0}, {0, 3, 1}, {5, 16, 5}, {20, 16, 16},
	} {
		if got := share(tc.set, tc.limit); got != tc.want {
			t.Errorf("share(%d, %d) = %d; want %d", tc.set, tc.limit, got, tc.want)
		}
	}
}

// TestEgressAllowNet: the ranges come from the repeatable flag or the
// comma-separated variable; loopback and link-local ranges, a range
// without an allowlist, and bad CIDRs are refused, naming the flag.
func TestEgressAllowNet(t *testing.T) {
	c, err := Load(newFS(), []string{"--egress-allow", "mirror.internal"}, envMap(map[string]string{"SANDBOXD_EGRESS_ALLOW_NET": "10.20.0.0/16, fd12:3456::/48"}))
	if err != nil || !reflect.DeepEqual(c.EgressAllowNets, []string{"10.20.0.0/16", "fd12:3456::/48"}) {
		t.Fatalf("env: %v %v", c.EgressAllowNets, err)
	}
	c, err = Load(newFS(), []string{"--egress-allow", "mirror.internal", "--egress-allow-net", "10.20.0.0/16", "--egress-allow-net", "100.64.1.0/24"}, envMap(nil))
	if err != nil || len(c.EgressAllowNets) != 2 {
		t.Fatalf("flags: %v %v", c.EgressAllowNets, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--egress-allow", "m.internal", "--egress-allow-net", "127.0.0.0/8"}, "loopback"},
		{[]string{"--egress-allow", "m.internal", "--egress-allow-net", "169.254.0.0/16"}, "link-local"},
		{[]string{"--egress-allow", "m.internal", "--egress-allow-net", "0.0.0.0/0"}, "unspecified"},
		{[]string{"--egress-allow", "m.internal", "--egress-allow-net", "10.0.0.1/8"}, "host bits"},
		{[]string{"--egress-allow-net", "10.0.0.0/8"}, "--egress-allow is empty"},
	} {
		_, err := Load(newFS(), tc.args, envMap(nil))
		if err == nil || !strings.Contains(err.Error(), "--egress-allow-net") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming --egress-allow-net and %q", tc.args, err, tc.want)
		}
	}
}

func TestArchiveRestoreMaxBytes(t *testing.T) {
	for _, tc := range []struct{ archive, caller, want int64 }{
		{200 << 20, 1 << 30, 200 << 20},
		{200 << 20, 0, 200 << 20},
		{0, 1 << 20, 1 << 20},
		{0, 0, 0},
		{2 << 30, 1 << 30, 1 << 30},
	} {
		c := Config{ArchiveMaxBytes: tc.archive, ArchiveCallerMaxBytes: tc.caller}
		if got := c.ArchiveRestoreMaxBytes(); got != tc.want {
			t.Errorf("max %d, caller %d: %d, want %d", tc.archive, tc.caller, got, tc.want)
		}
	}
}
