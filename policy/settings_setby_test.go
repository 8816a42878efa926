package policy

import (
	"reflect"
	"testing"
)

// TestSetByRecorded: a patch records its caller per key it sets, a null
// removes the key's setter, a later patch by another admin takes the key
// over, and Reclamp keeps the setters of the keys it keeps.
func TestSetByRecorded(t *testing.T) {
	op := archiveOp()
	ov, err := ApplyPatch(op, Overrides{}, []byte(`{"archive_backend":"s3","archive_s3_endpoint":"http://127.0.0.1:7070","archive_s3_bucket":"b-1.x","max_sessions":2}`), "key:ops")
	if err != nil {
		t.Fatal(err)
	}
	if ov, err = ApplyPatch(op, ov, []byte(`{"max_sessions":null,"archive_s3_bucket":"archives","idle_ttl_seconds":5}`), "uid:0"); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{SettingArchiveBackend: "key:ops", SettingS3Endpoint: "key:ops", SettingS3Bucket: "uid:0", SettingIdleTTL: "uid:0"}
	if !reflect.DeepEqual(ov.SetBy, want) {
		t.Fatalf("set_by %v, want %v", ov.SetBy, want)
	}
	out, _ := Reclamp(op, ov)
	if !reflect.DeepEqual(out.SetBy, want) {
		t.Fatalf("set_by after Reclamp %v, want %v", out.SetBy, want)
	}
	op.AdminS3Buckets, op.S3Bucket = nil, "other"
	out, _ = Reclamp(op, ov) // the bucket is no longer listed: dropped
	if _, ok := out.SetBy[SettingS3Bucket]; ok || len(out.SetBy) != len(want)-1 {
		t.Fatalf("set_by after a Reclamp that dropped settings: %v", out.SetBy)
	}
	for _, st := range SettingStates(Defaults(), archiveOp(), ov) {
		if st.SetBy != want[st.Key] {
			t.Errorf("state %s set_by %q, want %q", st.Key, st.SetBy, want[st.Key])
		}
	}
}

// TestRevoked: only settings whose setter is no longer an admin are
// listed; the archive ones are reset (an s3 backend whose bucket went with
// the revoked setter falls back to the operator's backend, never to a
// destination nobody chose); the limits stay; settings without a recorded
// setter are not judged.
func TestRevoked(t *testing.T) {
	op := archiveOp()
	op.S3Bucket = "" // so the s3 backend needs the admin's bucket
	ov, err := ApplyPatch(op, Overrides{}, []byte(`{"archive_s3_bucket":"b-1.x","max_sessions":2}`), "key:gone")
	if err != nil {
		t.Fatal(err)
	}
	if ov, err = ApplyPatch(op, ov, []byte(`{"archive_backend":"s3","archive_s3_endpoint":"http://127.0.0.1:7070","archive_s3_prefix":"p/"}`), "key:ops"); err != nil {
		t.Fatal(err)
	}
	ov.Ints[SettingIdleTTL] = 9 // persisted before setters were recorded
	isAdmin := func(who string) bool { return who == "key:ops" }
	got, next := Revoked(op, ov, isAdmin)
	want := []RevokedSetting{
		{Key: SettingS3Bucket, Value: "b-1.x", SetBy: "key:gone", Reset: true},
		{Key: SettingMaxSessions, Value: "2", SetBy: "key:gone"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("revoked %+v, want %+v", got, want)
	}
	e := Effective(op, next)
	if e.ArchiveBackend != "local" || e.S3Bucket != "" || e.MaxSessions != 2 || e.IdleTTLSeconds != 9 || next.S3[SettingS3Prefix] != "p/" {
		t.Fatalf("after: %+v max_sessions %d idle %d", ArchiveParamsOf(e), e.MaxSessions, e.IdleTTLSeconds)
	}
	if _, ok := next.SetBy[SettingS3Bucket]; ok {
		t.Fatalf("the reset bucket keeps its setter: %v", next.SetBy)
	}
	if got, _ := Revoked(op, ov, func(string) bool { return true }); len(got) != 0 {
		t.Fatalf("all setters admin, revoked %+v", got)
	}
}
