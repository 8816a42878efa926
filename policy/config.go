package policy

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/api"
	"github.com/sandboxd/sandboxd/egress"
)

// Defaults of the operator settings (docs/DESIGN.md; docs/API.md).
const (
	DefaultSocketPath = api.DefaultSocket
	DefaultStateDir   = "/var/lib/sandboxd"
	// DefaultAuditLogName is below the state dir, in a directory of its own:
	// the state dir itself is root-owned (the helper requires the parent of
	// workspaces/ to be), and the installer makes audit/ the service user's.
	DefaultAuditLogName     = "audit/audit.log"
	DefaultHelperPath       = "/usr/local/libexec/sandboxd/sandboxd-nsinit"
	DefaultHelperConfigPath = "/etc/sandboxd/nsinit.json"
	// DefaultAuditRotateBytes starts a new audit log file past 64 MiB
	// (some 10 000 execs).
	DefaultAuditRotateBytes = 64 << 20
	// DefaultAuditRetentionFiles keeps the 16 newest rotated audit files
	// (1 GiB at the default rotation size) and deletes older ones, each
	// deletion recorded in the chain (I11: audit volume is bounded).
	DefaultAuditRetentionFiles = 16

	DefaultExecTimeoutMS    = 30_000
	DefaultExecTimeoutMaxMS = 60_000  // one-shot execs
	DefaultExecTimeoutCapMS = 600_000 // session execs

	DefaultOutputLimitBytes    = 256 << 10
	DefaultMaxBodyBytes        = 8 << 20
	DefaultMaxCodeBytes        = 1 << 20
	DefaultTmpSizeBytes        = 256 << 20
	DefaultMemoryBytes         = 2 << 30
	DefaultPids                = 256
	DefaultCPUs                = 1.0
	DefaultNoFile              = 1024
	DefaultWorkspaceQuotaBytes = 1024 << 20
	DefaultMaxSessions         = 16
	DefaultMaxConcurrentExecs  = 4
	// DefaultWarmPool is the warm sandboxes kept per language (python,
	// javascript), a fixed size: sized for a 2-core host, where a third
	// idle interpreter buys no latency (one exec at a time per core takes
	// one, a replacement is built while it runs). --warm-pool MIN:MAX
	// lets the size follow the demand.
	DefaultWarmPool = 2
	// MaxWarmPool bounds --warm-pool's cap: each warm sandbox is an idle
	// interpreter (10-40 MiB) held under its own cgroup.
	MaxWarmPool = 32
	// DefaultHelperPool pre-starts two helpers: enough for concurrency 2
	// on a 2-core host (make bench).
	DefaultHelperPool        = 2
	DefaultMaxQueuedExecs    = 16
	DefaultIdleTTLSeconds    = 1800
	DefaultIdleTTLCapSeconds = 86400

	// Per-caller shares (I11: no caller can starve another). A caller is a
	// peer uid.
	DefaultMaxConnections          = 256
	DefaultMaxConnectionsPerCaller = 32
	// DefaultCallerBodyBudget lets one caller have two maximal bodies
	// (8 MiB each) in memory at once; a third waits for its turn with a 429.
	DefaultCallerBodyBudget      = 2 * DefaultMaxBodyBytes
	DefaultArchiveRetention      = 30 * 24 * time.Hour
	DefaultArchiveCallerMaxBytes = 1 << 30

	// Per-exec egress bounds (network "egress").
	DefaultEgressMaxConns = 64
	DefaultEgressMaxBytes = 256 << 20
)

// Hard bounds that Validate enforces on the operator's settings. They are
// sanity limits, not recommendations: a value outside them is a typo or a
// unit mistake (bytes for MiB, seconds for milliseconds), and starting with
// it would fail later and less clearly.
const (
	// maxSocketPathLen is sizeof(sockaddr_un.sun_path) minus the NUL; a
	// longer path cannot be bound at all.
	maxSocketPathLen = 107
	// MaxCodeBytesLimit keeps code below what the launch spec can carry:
	// code travels to the helper base64-encoded inside the JSON spec, whose
	// encoded size nsinit/spec.MaxSize caps at 8 MiB, so 3 MiB of code
	// (4 MiB encoded) leaves room for the rest of the spec. The launcher
	// still checks the encoded size, which is what the helper enforces.
	MaxCodeBytesLimit   = 3 << 20
	maxTimeoutCapMS     = 24 * 3600 * 1000
	maxOutputLimitBytes = 64 << 20
	maxBodyBytesLimit   = 1 << 30
	minBodyBytes        = 1 << 10
	maxUnixID           = 1<<32 - 2 // (uid_t)-1 means "no change" to the kernel
)

// Config is every operator setting of the supervisor that concerns the API
// and execs. Build one with Load (or Defaults, ApplyEnv, RegisterFlags and
// flag parsing, in that order), then call Validate.
type Config struct {
	// SocketPath is the Unix socket the API listens on.
	SocketPath string
	// SocketGroup, when set, is the group (name or numeric gid) given to the
	// socket, whose mode is 0660, so members of it can connect.
	SocketGroup string
	// AllowUIDs and AllowGIDs extend who may use the API beyond root and the
	// supervisor's own uid; a gid matches the peer's primary group.
	AllowUIDs []int
	AllowGIDs []int
	// AdminUIDs may read and change the live settings (GET/PATCH
	// /v1/admin/settings) besides root and the supervisor's own uid.
	AdminUIDs []int

	// Listen are TCP listen addresses ("tcp://HOST:PORT"), besides the
	// Unix socket. Their callers authenticate with API keys.
	Listen []string
	// E2BListen is the HOST:PORT of the E2B-compatible listener (package
	// e2b); "" is off. It has the keys and TLS of Listen.
	E2BListen string
	// APIKeysFile holds the API keys of TCP callers, one "name:key" (or
	// "name:key:admin") per line; root- or service-owned, mode 0600.
	APIKeysFile string
	// AllowNoAuth lets TCP listeners run without keys, and only when every
	// listen address is loopback (a trusted local dev box).
	AllowNoAuth bool
	// TLSCert and TLSKey make the TCP listeners speak TLS (reloaded on
	// SIGHUP); TLSClientCA, when set, requires and verifies a client
	// certificate signed by it.
	TLSCert     string
	TLSKey      string
	TLSClientCA string

	// StateDir holds workspaces, sessions and, by default, the audit log.
	StateDir string
	// AuditLogPath is the audit log; empty means StateDir/audit/audit.log (see
	// AuditLog).
	AuditLogPath string
	// AuditFsync makes audit records durable before the supervisor acts on
	// them: at the barriers before an exec runs and before every answer
	// (audit.Deferred).
	AuditFsync bool
	// AuditRotateBytes starts a new audit log file, linked to the old one,
	// once the current one would grow past it; 0 never rotates.
	AuditRotateBytes int64
	// AuditSyslog, when set, is a Unix datagram socket (e.g. /dev/log) every
	// audit record is also forwarded to, as an RFC 5424 message.
	AuditSyslog string
	// AuditRetentionFiles keeps at most this many rotated audit files; older
	// ones are deleted, oldest first, after a prune record naming them is
	// durable in the chain. 0 keeps every file.
	AuditRetentionFiles int
	// AuditEnvValues records the values of a request's env in the decide
	// record; by default only the names are recorded (values may be secrets).
	AuditEnvValues bool

	// ExecTimeoutMS is the timeout of an exec that does not ask for one.
	ExecTimeoutMS int64
	// ExecTimeoutMaxMS bounds timeout_ms of one-shot execs (1..this).
	ExecTimeoutMaxMS int64
	// ExecTimeoutCapMS bounds timeout_ms of session execs (1..this).
	ExecTimeoutCapMS int64

	// OutputLimitBytes cuts stdout and stderr, each.
	OutputLimitBytes int64
	// MaxBodyBytes bounds a JSON request body (413 too_large above it).
	MaxBodyBytes int64
	// MaxCodeBytes bounds the code of one exec (413 too_large above it).
	MaxCodeBytes int64

	TmpSizeBytes int64
	MemoryBytes  int64
	Pids         int64
	CPUs         float64
	NoFile       uint64
	// WorkspaceQuotaBytes is the disk quota of a workspace; it is also the
	// RLIMIT_FSIZE of every exec.
	WorkspaceQuotaBytes int64

	MaxSessions        int
	MaxConcurrentExecs int
	// WarmPool is how many warm sandboxes are kept per language for
	// one-shot execs (supervisor/warmpool.go): a floor and a cap the size
	// follows the demand between (equal: a fixed size); a cap of 0
	// disables the pool.
	WarmPool WarmPoolSize
	// HelperPool keeps this many sandboxd-nsinit helpers pre-started
	// (prelude done, in their own cgroup, waiting for a spec); 0: off.
	HelperPool int

	// MaxSessionsPerCaller bounds the sessions one uid holds at once.
	MaxSessionsPerCaller int
	// MaxConnections bounds the API connections open at once, and
	// MaxConnectionsPerCaller those of one uid; the excess is answered 429
	// and closed at accept.
	MaxConnections          int
	MaxConnectionsPerCaller int
	// CallerBodyBudget bounds the request-body bytes one uid may have in
	// memory at once; beyond it a request is refused (429) before its body
	// is read.
	CallerBodyBudget int64

	// ArchiveBackend is where keyed sessions' workspaces are archived when
	// they end: "local" (ArchiveDir), "s3" (the S3* settings) or "none".
	ArchiveBackend string
	// ArchiveDir holds local session archives (tar, by sha256 of the key);
	// empty: <state-dir>/archives. Only the operator sets it, never a request.
	ArchiveDir string
	// S3Endpoint, S3Bucket, S3Region, S3Prefix and S3CredentialsFile
	// configure the s3 archive backend (any S3 API: path-style addressing,
	// SigV4). Credentials come from the file (AWS shared-credentials
	// format, profile default) or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY.
	S3Endpoint        string
	S3Bucket          string
	S3Region          string
	S3Prefix          string
	S3CredentialsFile string
	// S3PathStyle addresses the bucket in the path (http://host/bucket/...,
	// what MinIO, Ceph RGW and versitygw need); false uses virtual-hosted
	// names (http://bucket.host/...).
	S3PathStyle bool
	// AdminArchiveBackends are the archive backends an admin may switch to
	// over the API (live settings); empty: the operator's --archive-backend
	// and none. AdminS3Endpoints are the S3 endpoints an admin may choose
	// besides --s3-endpoint: an endpoint is where every archive's bytes go
	// and the operator's credentials sign for, so only the operator names
	// them.
	AdminArchiveBackends []string
	AdminS3Endpoints     []string
	// AdminS3Buckets are the buckets an admin may choose besides
	// --s3-bucket: on a shared endpoint the bucket is the destination.
	AdminS3Buckets []string
	// S3Timeout bounds one archive transfer; S3 slow or down never holds a
	// delete longer.
	S3Timeout time.Duration
	// ArchiveMaxBytes skips (with a log line and an audit record) a larger archive.
	ArchiveMaxBytes int64
	// ArchiveRetention removes archives not written or restored for this
	// long (at start and periodically, audited); 0 keeps them forever.
	ArchiveRetention time.Duration
	// ArchiveCallerMaxBytes bounds the archive bytes one uid keeps; past
	// it the caller's oldest archives are removed (audited); 0: no bound.
	ArchiveCallerMaxBytes int64
	// Artifact limits: per file, number of files, total bytes.
	ArtifactMaxFileBytes  int64
	ArtifactMaxFiles      int64
	ArtifactMaxTotalBytes int64
	// CgroupParent names the directory that holds the exec cgroups: below
	// the supervisor's delegated cgroup v2 root (the supervisor makes it),
	// or below its own cgroup in each v1 hierarchy (the operator made it).
	CgroupParent string
	// AllowNoCgroups lets the supervisor start where it cannot enforce
	// memory, pids and CPU limits (no usable delegated cgroup subtree):
	// health then says "degraded" and results attest 0 for those limits.
	// Without it the supervisor refuses to start there (fail closed).
	AllowNoCgroups bool
	// MaxQueuedExecs bounds the execs waiting for a slot; beyond it, 429 at once.
	MaxQueuedExecs    int
	IdleTTLSeconds    int64
	IdleTTLCapSeconds int64
	// MaxQueuedExecsPerCaller bounds the waiting execs of one uid.
	MaxQueuedExecsPerCaller int

	// EgressAllow is the egress allowlist (--egress-allow: "pypi.org,
	// files.pythonhosted.org:443,*.npmjs.org"); empty: no exec may use
	// network "egress". Package egress parses and enforces it.
	EgressAllow string
	// EgressAllowNets are the special-purpose ranges (CIDR) an allowlisted
	// name may resolve into (--egress-allow-net: an internal package
	// mirror on 10.x). Never loopback, link-local, multicast, unspecified
	// or one of the host's own addresses; IP literals stay refused.
	EgressAllowNets []string
	// EgressAllowUIDs are the callers (uids) that may ask for network
	// "egress"; nobody else may, whatever the allowlist says.
	EgressAllowUIDs []int
	// EgressMaxConns and EgressMaxBytes bound one exec's egress: connection
	// attempts, and bytes relayed both ways over all of them.
	EgressMaxConns int
	EgressMaxBytes int64

	// HelperPath is the sandboxd-nsinit binary (file capabilities, no setuid).
	HelperPath string
	// HelperConfigPath is the helper's own root-owned config; the supervisor
	// only reports on it, the helper reads it.
	HelperConfigPath string

	// Environments are read from the helper config at start, never from
	// a flag or the environment (policy/environments.go).
	Environments Environments
}

// Defaults returns the built-in configuration.
func Defaults() Config {
	c := Config{
		SocketPath:            DefaultSocketPath,
		StateDir:              DefaultStateDir,
		AuditFsync:            true,
		AuditRotateBytes:      DefaultAuditRotateBytes,
		ExecTimeoutMS:         DefaultExecTimeoutMS,
		ExecTimeoutMaxMS:      DefaultExecTimeoutMaxMS,
		ExecTimeoutCapMS:      DefaultExecTimeoutCapMS,
		OutputLimitBytes:      DefaultOutputLimitBytes,
		MaxBodyBytes:          DefaultMaxBodyBytes,
		MaxCodeBytes:          DefaultMaxCodeBytes,
		TmpSizeBytes:          DefaultTmpSizeBytes,
		MemoryBytes:           DefaultMemoryBytes,
		Pids:                  DefaultPids,
		CPUs:                  DefaultCPUs,
		NoFile:                DefaultNoFile,
		WorkspaceQuotaBytes:   DefaultWorkspaceQuotaBytes,
		MaxSessions:           DefaultMaxSessions,
		MaxConcurrentExecs:    DefaultMaxConcurrentExecs,
		WarmPool:              WarmPoolSize{Min: DefaultWarmPool, Max: DefaultWarmPool},
		HelperPool:            DefaultHelperPool,
		MaxQueuedExecs:        DefaultMaxQueuedExecs,
		CgroupParent:          "sandboxd",
		ArchiveMaxBytes:       200 << 20,
		ArchiveBackend:        "local",
		S3Region:              "us-east-1",
		S3PathStyle:           true,
		S3Timeout:             2 * time.Minute,
		ArtifactMaxFileBytes:  20 << 20,
		ArtifactMaxFiles:      20,
		ArtifactMaxTotalBytes: 50 << 20,
		IdleTTLSeconds:        DefaultIdleTTLSeconds,
		IdleTTLCapSeconds:     DefaultIdleTTLCapSeconds,
		HelperPath:            DefaultHelperPath,
		HelperConfigPath:      DefaultHelperConfigPath,
		EgressMaxConns:        DefaultEgressMaxConns,
		EgressMaxBytes:        DefaultEgressMaxBytes,
	}
	c.setShareDefaults()
	return c
}

// setShareDefaults sets the per-caller limits and retention (I11).
func (c *Config) setShareDefaults() {
	c.AuditRetentionFiles = DefaultAuditRetentionFiles
	c.MaxConnections = DefaultMaxConnections
	c.MaxConnectionsPerCaller = DefaultMaxConnectionsPerCaller
	c.CallerBodyBudget = DefaultCallerBodyBudget
	c.ArchiveRetention = DefaultArchiveRetention
	c.ArchiveCallerMaxBytes = DefaultArchiveCallerMaxBytes
}

// AuditLog returns the audit log path: AuditLogPath, or audit/audit.log in the
// state dir when that is unset. It is computed rather than defaulted so that
// --state-dir alone moves the audit log along with everything else.
func (c Config) AuditLog() string {
	if c.AuditLogPath != "" {
		return c.AuditLogPath
	}
	return filepath.Join(c.StateDir, DefaultAuditLogName)
}

// ArchiveLocalDir is the local archive directory: --archive-dir, or
// <state-dir>/archives.
func (c Config) ArchiveLocalDir() string {
	if c.ArchiveDir != "" {
		return c.ArchiveDir
	}
	return filepath.Join(c.StateDir, "archives")
}

// ArchiveRestoreMaxBytes is the largest stored object a restore downloads:
// the smaller of --archive-max-bytes (no archive the supervisor writes is
// larger) and --archive-caller-max-bytes (no caller keeps more); 0 when
// neither is set. Anything larger was not written by this supervisor as
// configured and is refused before a byte of it is read.
func (c Config) ArchiveRestoreMaxBytes() int64 {
	var out int64
	for _, v := range []int64{c.ArchiveMaxBytes, c.ArchiveCallerMaxBytes} {
		if v > 0 && (out == 0 || v < out) {
			out = v
		}
	}
	return out
}

func (c Config) validateS3(bad badFunc) {
	for _, b := range c.AdminArchiveBackends {
		if b != "local" && b != "s3" && b != "none" {
			bad("admin-archive-backends", "%q is not local, s3 or none", b)
		}
	}
	for _, e := range c.AdminS3Endpoints {
		if err := CheckS3Endpoint(e); err != nil {
			bad("admin-s3-endpoint", "%v", err)
		}
	}
	for _, b := range c.AdminS3Buckets {
		if err := CheckS3Bucket(b); err != nil {
			bad("admin-s3-bucket", "%v", err)
		}
	}
	switch c.ArchiveBackend {
	case "local", "none":
		return
	case "s3":
	default:
		bad("archive-backend", "%q is not local, s3 or none", c.ArchiveBackend)
		return
	}
	if err := CheckS3Endpoint(c.S3Endpoint); err != nil {
		bad("s3-endpoint", "%v with --archive-backend s3", err)
	}
	if c.S3Bucket == "" {
		bad("s3-bucket", "must be set with --archive-backend s3")
	}
	if err := CheckS3Prefix(c.S3Prefix); err != nil {
		bad("s3-prefix", "%v", err)
	}
	if c.S3CredentialsFile != "" && !filepath.IsAbs(c.S3CredentialsFile) {
		bad("s3-credentials-file", "%q must be an absolute path", c.S3CredentialsFile)
	}
	if c.S3Timeout < time.Second || c.S3Timeout > time.Hour {
		bad("s3-timeout", "%v is out of range 1s..1h", c.S3Timeout)
	}
}

// setting is one operator setting: its flag name (the env variable is
// derived from it), its help text, and how to bind it to a Config.
type setting struct {
	name  string
	usage string
	bind  func(c *Config) flag.Value
}

// settings is the single table behind RegisterFlags and ApplyEnv, so a flag
// can never exist without its env variable or the other way round.
func settings() []setting {
	return []setting{
		{"socket", "Unix socket path of the API", func(c *Config) flag.Value { return (*stringValue)(&c.SocketPath) }},
		{"socket-group", "group (name or gid) given to the socket, mode 0660", func(c *Config) flag.Value { return (*stringValue)(&c.SocketGroup) }},
		{"allow-uid", "uid allowed to use the API besides root and the supervisor's own uid (repeatable or comma list)", func(c *Config) flag.Value { return &idListValue{p: &c.AllowUIDs} }},
		{"allow-gid", "primary gid allowed to use the API (repeatable or comma list)", func(c *Config) flag.Value { return &idListValue{p: &c.AllowGIDs} }},
		{"admin-uid", "uid allowed to read and change the live admin settings besides root and the supervisor's own uid (repeatable or comma list); it must also be allowed to use the API", func(c *Config) flag.Value { return &idListValue{p: &c.AdminUIDs} }},
		{"listen", "TCP listen address tcp://HOST:PORT besides the Unix socket (repeatable or comma list); callers authenticate with a bearer API key", func(c *Config) flag.Value { return &listenValue{p: &c.Listen} }},
		{"e2b-listen", "HOST:PORT of an E2B-compatible listener (docs/E2B.md), off when empty; same API keys, TLS and caller limits as --listen", func(c *Config) flag.Value { return (*stringValue)(&c.E2BListen) }},
		{"api-keys-file", "file of API keys for TCP callers, one name:key[:admin,egress] per line (root- or service-owned, mode 0600; reloaded on SIGHUP); make a key with openssl rand -hex 24", func(c *Config) flag.Value { return (*stringValue)(&c.APIKeysFile) }},
		{"allow-no-auth", "let TCP listeners run without API keys; refused unless every --listen address is loopback; only for a machine where no browser runs (requests from web pages are refused, but every local process is the one anonymous caller)", func(c *Config) flag.Value { return (*boolValue)(&c.AllowNoAuth) }},
		{"tls-cert", "TLS certificate (PEM) of the TCP listeners; reloaded on SIGHUP", func(c *Config) flag.Value { return (*stringValue)(&c.TLSCert) }},
		{"tls-key", "TLS private key (PEM) of the TCP listeners; reloaded on SIGHUP", func(c *Config) flag.Value { return (*stringValue)(&c.TLSKey) }},
		{"tls-client-ca", "CA bundle (PEM); when set, TCP clients must present a certificate it signed", func(c *Config) flag.Value { return (*stringValue)(&c.TLSClientCA) }},
		{"state-dir", "directory for workspaces, sessions and the default audit log", func(c *Config) flag.Value { return (*stringValue)(&c.StateDir) }},
		{"audit-log", "audit log path (default <state-dir>/audit/audit.log)", func(c *Config) flag.Value { return (*stringValue)(&c.AuditLogPath) }},
		{"audit-fsync", "make audit records durable (fdatasync, group-committed) before anything of an exec runs and before every answer", func(c *Config) flag.Value { return (*boolValue)(&c.AuditFsync) }},
		{"audit-rotate-bytes", "start a new audit log file, hash-linked to the old one, past this size; 0 never (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.AuditRotateBytes) }},
		{"audit-retention-files", "rotated audit files kept; older ones are deleted, oldest first, after a prune record naming them is in the chain; 0 keeps all", func(c *Config) flag.Value { return (*intValue)(&c.AuditRetentionFiles) }},
		{"audit-syslog", "also forward every audit record to this Unix datagram socket as RFC 5424 syslog (e.g. /dev/log); empty: off", func(c *Config) flag.Value { return (*stringValue)(&c.AuditSyslog) }},
		{"audit-env-values", "record the values of a request's env in the audit trail (default: names only; values may be secrets)", func(c *Config) flag.Value { return (*boolValue)(&c.AuditEnvValues) }},
		{"exec-timeout", "timeout of an exec that does not set timeout_ms, in ms", func(c *Config) flag.Value { return (*int64Value)(&c.ExecTimeoutMS) }},
		{"exec-timeout-max", "largest timeout_ms of a one-shot exec, in ms", func(c *Config) flag.Value { return (*int64Value)(&c.ExecTimeoutMaxMS) }},
		{"exec-timeout-cap", "largest timeout_ms of a session exec, in ms", func(c *Config) flag.Value { return (*int64Value)(&c.ExecTimeoutCapMS) }},
		{"output-limit", "stdout and stderr limit per stream (bytes, or with a KiB/MiB/GiB suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.OutputLimitBytes) }},
		{"max-body-bytes", "largest JSON request body (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.MaxBodyBytes) }},
		{"max-code-bytes", "largest code of one exec (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.MaxCodeBytes) }},
		{"tmp-size", "size of the sandbox's /tmp tmpfs (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.TmpSizeBytes) }},
		{"memory", "memory limit per exec (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.MemoryBytes) }},
		{"pids", "process limit per exec", func(c *Config) flag.Value { return (*int64Value)(&c.Pids) }},
		{"cpus", "CPU limit per exec, in CPUs", func(c *Config) flag.Value { return (*floatValue)(&c.CPUs) }},
		{"nofile", "open file limit (RLIMIT_NOFILE) per exec", func(c *Config) flag.Value { return (*uint64Value)(&c.NoFile) }},
		{"workspace-quota", "workspace disk quota, also RLIMIT_FSIZE (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.WorkspaceQuotaBytes) }},
		{"max-sessions", "most sessions at once", func(c *Config) flag.Value { return (*intValue)(&c.MaxSessions) }},
		{"max-sessions-per-caller", "most sessions one caller (uid) holds at once, beyond it 429; 0: half of --max-sessions", func(c *Config) flag.Value { return (*intValue)(&c.MaxSessionsPerCaller) }},
		{"helper-pool", "sandboxd-nsinit helpers kept pre-started (namespaces made, capabilities dropped, in their own cgroup, waiting for a launch; replaced every 30 s); each launch takes one, which takes the helper's start-up and the cgroup v1 move off its latency; 0: off", func(c *Config) flag.Value { return (*intValue)(&c.HelperPool) }},
		{"max-concurrent-execs", "most execs running at once; one caller (uid) holds at most this minus one", func(c *Config) flag.Value { return (*intValue)(&c.MaxConcurrentExecs) }},
		{"warm-pool", "warm sandboxes kept per language (python, javascript) for one-shot execs: built ahead, each taken by one exec and destroyed after it; N keeps N, MIN:MAX sizes each language by its recent exec rate between MIN and MAX (idle ones above MIN are retired); 0 disables", func(c *Config) flag.Value { return &warmPoolValue{p: &c.WarmPool} }},
		{"archive-backend", "where keyed sessions are archived when they end and restored from: local, s3 or none", func(c *Config) flag.Value { return (*stringValue)(&c.ArchiveBackend) }},
		{"archive-dir", "directory of local session archives (restored by key); empty: <state-dir>/archives", func(c *Config) flag.Value { return (*stringValue)(&c.ArchiveDir) }},
		{"s3-endpoint", "S3 API endpoint of the s3 archive backend, http(s)://host[:port] (AWS, MinIO, Ceph RGW...; path-style, SigV4)", func(c *Config) flag.Value { return (*stringValue)(&c.S3Endpoint) }},
		{"s3-bucket", "bucket of the s3 archive backend", func(c *Config) flag.Value { return (*stringValue)(&c.S3Bucket) }},
		{"s3-region", "region the s3 archive backend signs for", func(c *Config) flag.Value { return (*stringValue)(&c.S3Region) }},
		{"s3-prefix", "object name prefix of the s3 archive backend (empty, or ending in /)", func(c *Config) flag.Value { return (*stringValue)(&c.S3Prefix) }},
		{"s3-credentials-file", "AWS shared-credentials file ([default] aws_access_key_id, aws_secret_access_key) of the s3 archive backend; empty: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", func(c *Config) flag.Value { return (*stringValue)(&c.S3CredentialsFile) }},
		{"s3-path-style", "address the S3 bucket in the path (MinIO, Ceph RGW, versitygw); false: virtual-hosted bucket names", func(c *Config) flag.Value { return (*boolValue)(&c.S3PathStyle) }},
		{"admin-archive-backends", "archive backends an admin may switch to over the API (local, s3, none; comma list); empty: --archive-backend and none", func(c *Config) flag.Value { return &wordListValue{p: &c.AdminArchiveBackends} }},
		{"admin-s3-endpoint", "S3 endpoint an admin may choose over the API besides --s3-endpoint (repeatable or comma list); credentials stay the operator's", func(c *Config) flag.Value { return &wordListValue{p: &c.AdminS3Endpoints} }},
		{"admin-s3-bucket", "S3 bucket an admin may choose over the API besides --s3-bucket (repeatable or comma list); on a shared endpoint the bucket is where archives go, so no other is accepted", func(c *Config) flag.Value { return &wordListValue{p: &c.AdminS3Buckets} }},
		{"s3-timeout", "longest one archive transfer to or from S3 may take (Go duration)", func(c *Config) flag.Value { return (*durationValue)(&c.S3Timeout) }},
		{"archive-max-bytes", "largest session archive; a larger one is skipped (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.ArchiveMaxBytes) }},
		{"archive-retention", "remove archives not written or restored for this long, at start and hourly (Go duration or Nd days); 0 keeps them", func(c *Config) flag.Value { return (*durationValue)(&c.ArchiveRetention) }},
		{"archive-caller-max-bytes", "archive bytes one caller (uid) keeps; past it its oldest archives are removed; 0 no bound (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.ArchiveCallerMaxBytes) }},
		{"artifact-max-file-bytes", "largest artifact file returned (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.ArtifactMaxFileBytes) }},
		{"artifact-max-files", "most artifact files returned per exec", func(c *Config) flag.Value { return (*int64Value)(&c.ArtifactMaxFiles) }},
		{"artifact-max-total-bytes", "most artifact bytes returned per exec (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.ArtifactMaxTotalBytes) }},
		{"cgroup-parent", "directory that holds the per-exec cgroups: below the supervisor's delegated cgroup v2 root (made at start-up), or below its own cgroup in each v1 hierarchy, delegated to its uid", func(c *Config) flag.Value { return (*stringValue)(&c.CgroupParent) }},
		{"allow-no-cgroups", "start even where no delegated cgroup subtree is usable: memory, pids and CPU limits are then not enforced (health degraded, limits attested as 0); without it the supervisor refuses to start there", func(c *Config) flag.Value { return (*boolValue)(&c.AllowNoCgroups) }},
		{"max-queued-execs", "most execs waiting for a slot (each waits up to its own timeout); beyond it 429 at once", func(c *Config) flag.Value { return (*intValue)(&c.MaxQueuedExecs) }},
		{"max-queued-execs-per-caller", "most execs of one caller (uid) waiting for a slot, beyond it 429 at once; 0: half of --max-queued-execs", func(c *Config) flag.Value { return (*intValue)(&c.MaxQueuedExecsPerCaller) }},
		{"max-connections", "most API connections open at once on each listener (the Unix socket and each --listen address have their own); a TCP listener's connections that have not yet sent an authenticated request may take a quarter of it, one address (IPv6: one /64) a quarter of that; the excess is answered 429 and closed", func(c *Config) flag.Value { return (*intValue)(&c.MaxConnections) }},
		{"max-connections-per-caller", "most API connections one caller (uid or API key) holds open; the excess is answered 429 and closed", func(c *Config) flag.Value { return (*intValue)(&c.MaxConnectionsPerCaller) }},
		{"caller-body-budget", "request-body bytes one caller (uid) may have in memory at once; beyond it 429 before the body is read (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.CallerBodyBudget) }},
		{"idle-ttl", "default session idle TTL, in seconds", func(c *Config) flag.Value { return (*int64Value)(&c.IdleTTLSeconds) }},
		{"idle-ttl-cap", "largest session idle TTL, in seconds", func(c *Config) flag.Value { return (*int64Value)(&c.IdleTTLCapSeconds) }},
		{"egress-allow", "egress allowlist: comma list of host, host:port, *.domain (no port: 80 and 443); empty (default): no egress", func(c *Config) flag.Value { return (*stringValue)(&c.EgressAllow) }},
		{"egress-allow-net", "CIDR range an allowlisted name may resolve into although it is not public, e.g. an internal package mirror's 10.20.0.0/16 (repeatable or comma list); IP literals stay refused; loopback, link-local, multicast, unspecified and the host's own addresses are refused at start; empty (default): public addresses only", func(c *Config) flag.Value { return &wordListValue{p: &c.EgressAllowNets} }},
		{"egress-allow-uid", "uid that may ask for network \"egress\" (repeatable or comma list); nobody by default", func(c *Config) flag.Value { return &idListValue{p: &c.EgressAllowUIDs} }},
		{"egress-max-conns", "most egress connection attempts per exec", func(c *Config) flag.Value { return (*intValue)(&c.EgressMaxConns) }},
		{"egress-max-bytes", "most egress bytes per exec, both ways (bytes, or with a suffix)", func(c *Config) flag.Value { return (*sizeValue)(&c.EgressMaxBytes) }},
		{"helper", "path of the sandboxd-nsinit helper", func(c *Config) flag.Value { return (*stringValue)(&c.HelperPath) }},
		{"helper-config", "path of the helper's root-owned config", func(c *Config) flag.Value { return (*stringValue)(&c.HelperConfigPath) }},
	}
}

// EnvName returns the environment variable of a flag: SANDBOXD_ and the flag
// name in upper snake case ("state-dir" -> "SANDBOXD_STATE_DIR").
func EnvName(flagName string) string {
	return "SANDBOXD_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// RegisterFlags defines one flag per setting on fs, bound to cfg. A flag's
// default is cfg's value at the time of the call, so call ApplyEnv first:
// then the help shows what is really in force and a flag given on the
// command line wins over the environment.
func RegisterFlags(fs *flag.FlagSet, cfg *Config) {
	for _, s := range settings() {
		fs.Var(s.bind(cfg), s.name, s.usage+" (env "+EnvName(s.name)+")")
	}
}

// ApplyEnv sets every setting whose SANDBOXD_* variable getenv returns
// non-empty. An empty variable counts as unset, so an operator can blank one
// out in a unit file without changing the meaning. Call it before flags are
// parsed: the order Defaults, ApplyEnv, flags gives "flag wins over env, env
// wins over default". All bad variables are reported together.
func ApplyEnv(cfg *Config, getenv func(string) string) error {
	var errs []error
	for _, s := range settings() {
		name := EnvName(s.name)
		v := getenv(name)
		if v == "" {
			continue
		}
		if err := s.bind(cfg).Set(v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: %w", name, v, err))
		}
	}
	return errors.Join(errs...)
}

// Load builds a validated Config from the defaults, the environment and the
// command-line arguments, in that order of precedence from lowest. fs should
// be fresh; Load registers the settings on it and parses args.
func Load(fs *flag.FlagSet, args []string, getenv func(string) string) (Config, error) {
	cfg := Defaults()
	if err := ApplyEnv(&cfg, getenv); err != nil {
		return Config{}, fmt.Errorf("environment: %w", err)
	}
	RegisterFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return Config{}, fmt.Errorf("flags: %w", err)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// Validate reports every setting that is out of range, naming the flag so the
// operator knows what to change.
func (c Config) Validate() error {
	var errs []error
	bad := func(flagName, format string, args ...any) {
		errs = append(errs, fmt.Errorf("--%s: %s", flagName, fmt.Sprintf(format, args...)))
	}
	absPath := func(flagName, p string) {
		switch {
		case p == "":
			bad(flagName, "must be set")
		case !filepath.IsAbs(p):
			bad(flagName, "%q is not an absolute path", p)
		case strings.ContainsRune(p, 0):
			bad(flagName, "contains a NUL byte")
		}
	}

	c.validatePaths(bad, absPath)
	c.validateEgress(bad)
	c.validateTimeouts(bad)
	c.validateLimits(bad)
	c.validateCapacity(bad)
	c.validateS3(bad)
	c.validateShares(bad)
	c.validateListen(bad, absPath)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid configuration: %w", err)
	}
	return nil
}

// badFunc reports one flag's invalid value.
type badFunc func(flagName, format string, args ...any)

// validatePaths checks the paths, ids and names the supervisor is given.
func (c Config) validatePaths(bad badFunc, absPath func(flagName, p string)) {
	absPath("socket", c.SocketPath)
	if len(c.SocketPath) > maxSocketPathLen {
		bad("socket", "%q is %d bytes; a Unix socket path can have at most %d", c.SocketPath, len(c.SocketPath), maxSocketPathLen)
	}
	absPath("state-dir", c.StateDir)
	if c.AuditLogPath != "" {
		absPath("audit-log", c.AuditLogPath)
	}
	if c.AuditSyslog != "" {
		absPath("audit-syslog", c.AuditSyslog)
	}
	absPath("helper", c.HelperPath)
	absPath("helper-config", c.HelperConfigPath)
	for _, id := range c.AllowUIDs {
		if id < 0 || id > maxUnixID {
			bad("allow-uid", "%d is not a valid uid (0..%d)", id, maxUnixID)
		}
	}
	for _, id := range c.AdminUIDs {
		if id < 0 || id > maxUnixID {
			bad("admin-uid", "%d is not a valid uid (0..%d)", id, maxUnixID)
		}
	}
	for _, id := range c.AllowGIDs {
		if id < 0 || id > maxUnixID {
			bad("allow-gid", "%d is not a valid gid (0..%d)", id, maxUnixID)
		}
	}
	if c.ArchiveDir != "" && !filepath.IsAbs(c.ArchiveDir) {
		bad("archive-dir", "%q must be an absolute path", c.ArchiveDir)
	}
	if c.CgroupParent == "" || strings.ContainsAny(c.CgroupParent, "/") || c.CgroupParent == "." || c.CgroupParent == ".." {
		bad("cgroup-parent", "%q must be a single directory name", c.CgroupParent)
	}
}

// validateEgress checks the allowlist and the per-exec egress limits.
func (c Config) validateEgress(bad badFunc) {
	if _, err := egress.ParseAllowlist(c.EgressAllow); err != nil {
		// One phrase for every bad list (docs/CONFIG.md shows it); the
		// supervisor's own parse at start names the entry.
		bad("egress-allow", "want a comma list of host names, each optionally *.-prefixed and :port-suffixed (no IP literals)")
	}
	if _, err := egress.ParseAllowNets(c.EgressAllowNets); err != nil {
		bad("egress-allow-net", "%v", err)
	}
	if len(c.EgressAllowNets) > 0 && c.EgressAllow == "" {
		bad("egress-allow-net", "is set but --egress-allow is empty: a range admits only names on the allowlist")
	}
	if c.EgressMaxConns < 1 || c.EgressMaxConns > 100_000 {
		bad("egress-max-conns", "%d is outside 1..100000", c.EgressMaxConns)
	}
	if c.EgressMaxBytes < 1 {
		bad("egress-max-bytes", "must be positive")
	}
}

// validateTimeouts checks the exec timeouts and session TTLs against their
// caps.
func (c Config) validateTimeouts(bad badFunc) {
	if c.ExecTimeoutCapMS < 1 || c.ExecTimeoutCapMS > maxTimeoutCapMS {
		bad("exec-timeout-cap", "%d ms is out of range 1..%d", c.ExecTimeoutCapMS, maxTimeoutCapMS)
	}
	if c.ExecTimeoutMaxMS < 1 || c.ExecTimeoutMaxMS > c.ExecTimeoutCapMS {
		bad("exec-timeout-max", "%d ms is out of range 1..%d (--exec-timeout-cap)", c.ExecTimeoutMaxMS, c.ExecTimeoutCapMS)
	}
	// The default must be acceptable for one-shot execs too, or a request
	// that sets no timeout would be refused.
	if c.ExecTimeoutMS < 1 || c.ExecTimeoutMS > c.ExecTimeoutMaxMS {
		bad("exec-timeout", "%d ms is out of range 1..%d (--exec-timeout-max)", c.ExecTimeoutMS, c.ExecTimeoutMaxMS)
	}
	if c.IdleTTLCapSeconds < 1 {
		bad("idle-ttl-cap", "%d s is below 1", c.IdleTTLCapSeconds)
	}
	if c.IdleTTLSeconds < 1 || c.IdleTTLSeconds > c.IdleTTLCapSeconds {
		bad("idle-ttl", "%d s is out of range 1..%d (--idle-ttl-cap)", c.IdleTTLSeconds, c.IdleTTLCapSeconds)
	}
}

// validateLimits checks the per-exec resource, output and artifact limits
// and the sizes of what the supervisor keeps (audit files, archives).
func (c Config) validateLimits(bad badFunc) {
	if c.AuditRotateBytes != 0 && c.AuditRotateBytes < 4<<10 {
		bad("audit-rotate-bytes", "%d bytes is below 4 KiB (0 disables rotation)", c.AuditRotateBytes)
	}
	if c.OutputLimitBytes < 1 || c.OutputLimitBytes > maxOutputLimitBytes {
		bad("output-limit", "%d bytes is out of range 1..%d", c.OutputLimitBytes, maxOutputLimitBytes)
	}
	if c.MaxBodyBytes < minBodyBytes || c.MaxBodyBytes > maxBodyBytesLimit {
		bad("max-body-bytes", "%d bytes is out of range %d..%d", c.MaxBodyBytes, minBodyBytes, maxBodyBytesLimit)
	}
	if c.MaxCodeBytes < 1 || c.MaxCodeBytes > MaxCodeBytesLimit {
		bad("max-code-bytes", "%d bytes is out of range 1..%d (the launch spec carries the code)", c.MaxCodeBytes, MaxCodeBytesLimit)
	}
	if c.TmpSizeBytes < 1<<20 {
		bad("tmp-size", "%d bytes is below 1 MiB", c.TmpSizeBytes)
	}
	if c.MemoryBytes < 16<<20 {
		bad("memory", "%d bytes is below 16 MiB; no runtime starts in less", c.MemoryBytes)
	}
	if c.Pids < 1 || c.Pids > 1<<22 {
		bad("pids", "%d is out of range 1..%d", c.Pids, 1<<22)
	}
	if !(c.CPUs > 0) || c.CPUs > 1024 {
		bad("cpus", "%g is out of range (0, 1024]", c.CPUs)
	}
	if c.NoFile < 16 || c.NoFile > 1<<20 {
		bad("nofile", "%d is out of range 16..%d", c.NoFile, 1<<20)
	}
	if c.WorkspaceQuotaBytes < 1<<20 {
		bad("workspace-quota", "%d bytes is below 1 MiB", c.WorkspaceQuotaBytes)
	}
	for _, l := range []struct {
		flag string
		v    int64
	}{{"archive-max-bytes", c.ArchiveMaxBytes}, {"artifact-max-file-bytes", c.ArtifactMaxFileBytes},
		{"artifact-max-files", c.ArtifactMaxFiles}, {"artifact-max-total-bytes", c.ArtifactMaxTotalBytes}} {
		if l.v < 0 {
			bad(l.flag, "%d is negative", l.v)
		}
	}
}

// validateCapacity checks how much runs at once: sessions, execs, queues
// and the pools.
func (c Config) validateCapacity(bad badFunc) {
	if c.MaxSessions < 0 {
		bad("max-sessions", "%d is negative (0 disables sessions)", c.MaxSessions)
	}
	if c.MaxQueuedExecs < 0 {
		bad("max-queued-execs", "%d is negative", c.MaxQueuedExecs)
	}
	if err := c.WarmPool.Validate(); err != nil {
		bad("warm-pool", "%v", err)
	}
	if c.MaxConcurrentExecs < 1 {
		bad("max-concurrent-execs", "%d is below 1", c.MaxConcurrentExecs)
	}
	if c.HelperPool < 0 || c.HelperPool > 64 {
		bad("helper-pool", "%d is outside 0..64", c.HelperPool)
	}
}

// validateListen checks the TCP listener settings. It refuses, so the
// supervisor refuses to start, a TCP listener nobody has to authenticate
// to, unless the operator said so and it is reachable from this host only.
func (c Config) validateListen(bad badFunc, absPath func(flagName, p string)) {
	for _, l := range c.Listen {
		if _, err := ParseListen(l); err != nil {
			bad("listen", "%v", err)
		}
	}
	tcp := c.Listen
	if c.E2BListen != "" {
		// The E2B listener is one more TCP listener: the same rules.
		if _, err := ParseListen("tcp://" + c.E2BListen); err != nil {
			bad("e2b-listen", "%v", err)
		}
		tcp = append(slices.Clip(tcp), "tcp://"+c.E2BListen)
	}
	if c.APIKeysFile != "" {
		absPath("api-keys-file", c.APIKeysFile)
	}
	if len(tcp) > 0 && c.APIKeysFile == "" {
		if !c.AllowNoAuth {
			bad("listen", "refusing to listen on TCP without API keys: set --api-keys-file (one name:key per line, mode 0600; make a key with `openssl rand -hex 24`), or, on a machine where no browser runs, --allow-no-auth with loopback addresses")
		}
		for _, l := range tcp {
			if c.AllowNoAuth && !IsLoopbackListen(l) {
				bad("allow-no-auth", "%s is not a loopback address: without API keys a TCP listener may bind only 127.0.0.0/8, [::1] or localhost; set --api-keys-file", l)
			}
		}
	}
	for _, f := range []struct{ flag, v string }{{"tls-cert", c.TLSCert}, {"tls-key", c.TLSKey}, {"tls-client-ca", c.TLSClientCA}} {
		if f.v != "" {
			absPath(f.flag, f.v)
			if len(tcp) == 0 {
				bad(f.flag, "is set but there is no --listen address for it")
			}
		}
	}
	if (c.TLSCert == "") != (c.TLSKey == "") {
		bad("tls-cert", "--tls-cert and --tls-key go together")
	}
	if c.TLSClientCA != "" && c.TLSCert == "" {
		bad("tls-client-ca", "client certificates need TLS: set --tls-cert and --tls-key")
	}
}

// share is a caller's part of a global limit: set, or half of it (at
// least 1 while the limit allows anything).
func share(set, limit int) int {
	if set > 0 {
		return min(set, limit)
	}
	return min(max(limit/2, 1), limit)
}

// SessionShare is the number of sessions one caller may hold at once.
func (c Config) SessionShare() int { return share(c.MaxSessionsPerCaller, c.MaxSessions) }

// QueueShare is the number of execs of one caller that may wait for a slot.
func (c Config) QueueShare() int { return share(c.MaxQueuedExecsPerCaller, c.MaxQueuedExecs) }

// validateShares checks the per-caller limits (I11). Each share must leave
// room for a second caller, or one caller could still take everything.
func (c Config) validateShares(bad badFunc) {
	if c.AuditRetentionFiles < 0 {
		bad("audit-retention-files", "%d is negative (0 keeps every file)", c.AuditRetentionFiles)
	}
	if c.MaxSessionsPerCaller < 0 || c.MaxSessionsPerCaller > max(c.MaxSessions, 0) {
		bad("max-sessions-per-caller", "%d is out of range 0..%d (--max-sessions; 0: half of it)", c.MaxSessionsPerCaller, max(c.MaxSessions, 0))
	}
	if c.MaxQueuedExecsPerCaller < 0 || c.MaxQueuedExecsPerCaller > max(c.MaxQueuedExecs, 0) {
		bad("max-queued-execs-per-caller", "%d is out of range 0..%d (--max-queued-execs; 0: half of it)", c.MaxQueuedExecsPerCaller, max(c.MaxQueuedExecs, 0))
	}
	if c.MaxConnections < 2 || c.MaxConnections > 1<<20 {
		bad("max-connections", "%d is out of range 2..%d", c.MaxConnections, 1<<20)
	}
	// At most half of all connections: a second caller always finds room.
	if c.MaxConnectionsPerCaller < 1 || c.MaxConnectionsPerCaller > c.MaxConnections/2 {
		bad("max-connections-per-caller", "%d is out of range 1..%d (--max-connections)/2", c.MaxConnectionsPerCaller, c.MaxConnections/2)
	}
	if c.CallerBodyBudget < c.MaxBodyBytes {
		bad("caller-body-budget", "%d bytes is below %d (--max-body-bytes): no maximal body could ever be read", c.CallerBodyBudget, c.MaxBodyBytes)
	}
	if c.ArchiveRetention < 0 {
		bad("archive-retention", "%q is negative (0 keeps archives forever)", c.ArchiveRetention.String())
	}
	if c.ArchiveCallerMaxBytes < 0 {
		bad("archive-caller-max-bytes", "%d is negative (0: no bound)", c.ArchiveCallerMaxBytes)
	}
}

//go:generate go run ./internal/configdoc -out ../docs/CONFIG.md

// SettingDoc describes one operator setting for the generated configuration
// reference (docs/CONFIG.md, policy/internal/configdoc): its flag, its
// environment variable, its help text, the kind of value it takes and its
// built-in default as the flag prints it.
type SettingDoc struct {
	Flag    string
	Env     string
	Usage   string
	Kind    string
	Default string
}

// SettingDocs lists every setting of the settings table, in its order. It
// exists for documentation only and changes nothing.
func SettingDocs() []SettingDoc {
	def := Defaults()
	var out []SettingDoc
	for _, s := range settings() {
		v := s.bind(&def)
		kind := "string"
		switch v.(type) {
		case *boolValue:
			kind = "bool"
		case *intValue, *int64Value:
			kind = "integer"
		case *uint64Value:
			kind = "unsigned integer"
		case *floatValue:
			kind = "number"
		case *sizeValue:
			kind = "size"
		case *durationValue:
			kind = "duration"
		case *idListValue:
			kind = "id list"
		case *listenValue:
			kind = "address list"
		case *warmPoolValue:
			kind = "N or MIN:MAX"
		}
		out = append(out, SettingDoc{Flag: s.name, Env: EnvName(s.name), Usage: s.usage, Kind: kind, Default: v.String()})
	}
	return out
}
