package policy

import (
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"

	"github.com/sandboxd/sandboxd/errdefs"
)

// archiveOp: an operator on local who lets admins choose s3 (with one
// extra endpoint) or none.
func archiveOp() Config {
	c := opConfig()
	c.AdminArchiveBackends = []string{"local", "s3", "none"}
	c.AdminS3Endpoints = []string{"http://127.0.0.1:7070"}
	c.S3Bucket = "archives"
	c.AdminS3Buckets = []string{"b-1.x"}
	return c
}

func TestApplyPatchArchive(t *testing.T) {
	for _, tc := range []struct {
		name, patch string
		op          func(*Config)
		want        string // "" = accepted
	}{
		{"s3 with an allowed endpoint", `{"archive_backend":"s3","archive_s3_endpoint":"http://127.0.0.1:7070"}`, nil, ""},
		{"s3 with every parameter", `{"archive_backend":"s3","archive_s3_endpoint":"http://127.0.0.1:7070","archive_s3_bucket":"b-1.x","archive_s3_region":"eu-west-1","archive_s3_prefix":"a/b/","archive_s3_path_style":false}`, nil, ""},
		{"s3 without an endpoint", `{"archive_backend":"s3"}`, nil, "archive_s3_endpoint"},
		{"endpoint not listed", `{"archive_s3_endpoint":"http://evil.example:9000"}`, nil, "not one of the operator's endpoints http://127.0.0.1:7070"},
		{"no endpoint listed", `{"archive_s3_endpoint":"http://127.0.0.1:7070"}`, func(c *Config) { c.AdminS3Endpoints = nil }, "allows no S3 endpoint"},
		{"endpoint with a path", `{"archive_s3_endpoint":"http://127.0.0.1:7070/x"}`, nil, "no path"},
		{"endpoint with a user", `{"archive_s3_endpoint":"http://u:p@127.0.0.1:7070"}`, nil, "no path, user"},
		{"bucket upper case", `{"archive_s3_bucket":"Archives"}`, nil, "S3 bucket name"},
		{"bucket short", `{"archive_s3_bucket":"ab"}`, nil, "S3 bucket name"},
		{"bucket not a string", `{"archive_s3_bucket":7}`, nil, "want a string"},
		{"bucket not listed", `{"archive_s3_bucket":"other-tenant"}`, nil, "not one of the operator's buckets archives, b-1.x"},
		{"no bucket listed", `{"archive_s3_bucket":"archives"}`, func(c *Config) { c.S3Bucket, c.AdminS3Buckets = "", nil }, "allows no S3 bucket"},
		{"region bad", `{"archive_s3_region":"eu west"}`, nil, "region name"},
		{"prefix absolute", `{"archive_s3_prefix":"/a/"}`, nil, "relative prefix"},
		{"prefix dotdot", `{"archive_s3_prefix":"a/../"}`, nil, "relative prefix"},
		{"prefix no slash", `{"archive_s3_prefix":"a"}`, nil, "relative prefix"},
		{"prefix empty", `{"archive_s3_prefix":""}`, nil, ""},
		{"path style string", `{"archive_s3_path_style":"false"}`, nil, "want true or false"},
		{"credentials", `{"archive_s3_credentials":"x"}`, nil, "never accepted over the API"},
		{"access key", `{"archive_s3_access_key_id":"AKIA"}`, nil, "unknown setting"},
		{"secret", `{"archive_s3_secret_access_key":"x"}`, nil, "never accepted over the API"},
		{"s3 not listed", `{"archive_backend":"s3","archive_s3_endpoint":"http://127.0.0.1:7070"}`,
			func(c *Config) { c.AdminArchiveBackends = []string{"local", "none"} }, "--admin-archive-backends"},
		{"s3 with the operator's own s3", `{"archive_backend":"none"}`,
			func(c *Config) {
				c.ArchiveBackend, c.S3Endpoint, c.AdminArchiveBackends = "s3", "http://s3.local:9000", nil
			}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := archiveOp()
			if tc.op != nil {
				tc.op(&op)
			}
			next, err := ApplyPatch(op, Overrides{}, []byte(tc.patch), "uid:0")
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if e := Effective(op, next); strings.Contains(tc.patch, `"s3"`) && e.ArchiveBackend != "s3" {
					t.Fatalf("effective backend %q", e.ArchiveBackend)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, errdefs.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

// TestReclampArchive: at start, an endpoint the operator no longer lists
// is dropped, and with it an s3 backend that needed it.
func TestReclampArchive(t *testing.T) {
	op := archiveOp()
	ov, err := ApplyPatch(op, Overrides{}, []byte(`{"archive_backend":"s3","archive_s3_endpoint":"http://127.0.0.1:7070","archive_s3_prefix":"p/"}`), "uid:0")
	if err != nil {
		t.Fatal(err)
	}
	if e := Effective(op, ov); e.ArchiveBackend != "s3" || e.S3Endpoint != "http://127.0.0.1:7070" || e.S3Prefix != "p/" {
		t.Fatalf("effective %+v", ArchiveParamsOf(e))
	}
	op.AdminS3Endpoints = nil
	out, notes := Reclamp(op, ov)
	if out.ArchiveBackend != "" || out.S3[SettingS3Endpoint] != "" || out.S3[SettingS3Prefix] != "p/" || len(notes) != 2 {
		t.Fatalf("reclamped %+v, notes %v", out, notes)
	}
	if e := Effective(op, out); e.ArchiveBackend != "local" {
		t.Fatalf("effective backend %q after reclamp", e.ArchiveBackend)
	}
}

// TestArchiveStates: caps are the lists, credentials are not a row here
// (the supervisor adds it: only it can tell whether they are set).
func TestArchiveStates(t *testing.T) {
	op := archiveOp()
	got := map[string]SettingState{}
	for _, s := range SettingStates(Defaults(), op, Overrides{}) {
		got[s.Key] = s
	}
	if got[SettingArchiveBackend].Cap != "local|s3|none" || got[SettingS3Endpoint].Cap != "http://127.0.0.1:7070" || got[SettingS3Bucket].Cap != "archives|b-1.x" ||
		got[SettingS3PathStyle].Value != true || got[SettingS3Bucket].Value != "archives" {
		t.Fatalf("states %+v", got)
	}
	if _, ok := got[SettingS3Credentials]; ok {
		t.Fatal("credentials row from policy")
	}
}

// TestAdminArchiveFlags: the caps come from flags and SANDBOXD_* variables
// alike; a flag replaces the variable's list (flag wins over env).
func TestAdminArchiveFlags(t *testing.T) {
	env := map[string]string{"SANDBOXD_ADMIN_ARCHIVE_BACKENDS": "local,none", "SANDBOXD_ADMIN_S3_ENDPOINT": "http://a:9000,http://b:9000", "SANDBOXD_ADMIN_S3_BUCKET": "tenant-a,tenant-b"}
	c, err := Load(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--admin-archive-backends", "s3", "--admin-archive-backends", "none", "--s3-path-style=false"},
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.AdminArchiveBackends, []string{"s3", "none"}) || !slices.Equal(c.AdminS3Endpoints, []string{"http://a:9000", "http://b:9000"}) || c.S3PathStyle ||
		!slices.Equal(c.AdminS3Buckets, []string{"tenant-a", "tenant-b"}) {
		t.Fatalf("backends %v, endpoints %v, path style %v", c.AdminArchiveBackends, c.AdminS3Endpoints, c.S3PathStyle)
	}
	if _, err := Load(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--admin-s3-endpoint", "s3.example"}, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "--admin-s3-endpoint") {
		t.Fatalf("a bare host accepted: %v", err)
	}
	if _, err := Load(flag.NewFlagSet("t", flag.ContinueOnError), []string{"--admin-s3-bucket", "Bad_Bucket"}, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "--admin-s3-bucket") {
		t.Fatalf("a bad bucket name accepted: %v", err)
	}
}

// TestArchiveBucketIsCapped: on a shared endpoint the bucket is the
// destination, so an admin may name only the operator's bucket (and those
// of --admin-s3-bucket); a persisted bucket the operator no longer lists
// is dropped at start, with a note.
func TestArchiveBucketIsCapped(t *testing.T) {
	op := archiveOp()
	_, err := ApplyPatch(op, Overrides{}, []byte(`{"archive_s3_bucket":"attacker-bucket"}`), "uid:0")
	if err == nil || !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "archives") {
		t.Errorf("a bucket the operator did not list: %v, want 400 naming the operator's bucket", err)
	}
	if _, err := ApplyPatch(op, Overrides{}, []byte(`{"archive_s3_bucket":"archives"}`), "uid:0"); err != nil {
		t.Errorf("the operator's own bucket: %v", err)
	}
	persisted := Overrides{S3: map[string]string{SettingS3Bucket: "attacker-bucket", SettingS3Prefix: "p/"}}
	out, notes := Reclamp(op, persisted)
	if _, ok := out.S3[SettingS3Bucket]; ok || out.S3[SettingS3Prefix] != "p/" || len(notes) != 1 || !strings.Contains(notes[0], "attacker-bucket") {
		t.Errorf("reclamped %+v, notes %v: want the bucket dropped with a note", out, notes)
	}
	if e := Effective(op, persisted); e.S3Bucket != "archives" {
		t.Errorf("effective bucket %q from an unlisted override", e.S3Bucket)
	}
}
