package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/sandboxd/sandboxd/archive"
	"github.com/sandboxd/sandboxd/archive/archivetest"
)

// TestArchiveS3Caps: with real privilege separation and a real S3 server,
// an object planted under a caller's archive name that is larger than any
// archive may be is refused from its recorded size — the session starts
// empty, the refusal is audited and nothing of it reaches the spool
// directory; an admin may point archives only at a bucket the operator
// named, and a persisted bucket the operator stops naming is dropped at
// the next start.
func TestArchiveS3Caps(t *testing.T) {
	in := setup(t)
	srv := archivetest.Start(t)
	emptyState(t, in)
	ctx := context.Background()
	const other = "other-tenant"
	if err := srv.Client().MakeBucket(ctx, other, minio.MakeBucketOptions{}); err != nil {
		t.Fatal(err)
	}
	prefix := "caps-" + randID() + "/"
	base := append(s3Flags(t, in, srv, prefix), "--admin-archive-backends", "s3,none", "--archive-max-bytes", "1048576")
	s := in.startSupervisor(t, supervisorOpts{extra: base})

	// An object of 2 MiB with a matching sha256 under root's archive name.
	key := "planted-" + randID()
	body := make([]byte, 2<<20)
	sum := sha256.Sum256(body)
	name := prefix + archive.Name(archive.KeyFor("uid:0", key))
	if _, err := srv.Client().PutObject(ctx, srv.Bucket, name, bytes.NewReader(body), int64(len(body)),
		minio.PutObjectOptions{UserMetadata: map[string]string{"sha256": hex.EncodeToString(sum[:])}}); err != nil {
		t.Fatal(err)
	}
	sess := s.createSession(t, map[string]any{"key": key})
	if sess.Restored {
		t.Fatal("an oversized planted object was restored")
	}
	var refused string
	for _, rec := range s.auditRecords() {
		if rec["step"] == "session.restore" && rec["ok"] == false {
			refused = fmt.Sprint(rec["error"])
		}
	}
	if !strings.Contains(refused, "2097152 bytes stored, over the 1048576 bytes") {
		t.Errorf("session.restore refusal %q, want it to name the sizes", refused)
	}
	if spool, _ := os.ReadDir(in.path("state", "archives", "spool")); len(spool) != 0 {
		t.Errorf("spool files left: %v", spool)
	}
	s.do("DELETE", "/v1/sessions/"+sess.ID, nil)

	// The bucket is capped like the endpoint.
	st, b := s.do("PATCH", "/v1/admin/settings", map[string]any{"archive_s3_bucket": other})
	if st != 400 || !strings.Contains(string(b), "not one of the operator's buckets "+srv.Bucket) {
		t.Fatalf("PATCH a bucket the operator did not name: %d %s", st, b)
	}
	s.stop()
	s2 := in.startSupervisor(t, supervisorOpts{extra: append(base, "--admin-s3-bucket", other)})
	if st, b := s2.do("PATCH", "/v1/admin/settings", map[string]any{"archive_s3_bucket": other}); st != 200 {
		t.Fatalf("PATCH a bucket of --admin-s3-bucket: %d %s", st, b)
	}
	s2.stop()
	s3 := in.startSupervisor(t, supervisorOpts{extra: base})
	if got := settingValue(t, s3, "archive_s3_bucket"); got != srv.Bucket {
		t.Errorf("archive_s3_bucket after the operator stopped naming %s: %q", other, got)
	}
	if !strings.Contains(s3.logs.String(), other) {
		t.Errorf("the start did not log the dropped bucket:\n%s", s3.logs)
	}
}

// settingValue reads one live setting's effective value.
func settingValue(t *testing.T, s *supervisor, key string) string {
	t.Helper()
	st, b := s.do("GET", "/v1/admin/settings", nil)
	if st != 200 {
		t.Fatalf("GET settings: %d %s", st, b)
	}
	var out struct {
		Settings []struct {
			Key   string `json:"key"`
			Value any    `json:"value"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	for _, r := range out.Settings {
		if r.Key == key {
			return fmt.Sprint(r.Value)
		}
	}
	t.Fatalf("no setting %s in %s", key, b)
	return ""
}
