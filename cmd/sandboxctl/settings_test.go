package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSettingArgs(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    map[string]any
		wantErr string
	}{
		{[]string{"exec_timeout_ms=2000", "archive_backend=none"}, map[string]any{"exec_timeout_ms": int64(2000), "archive_backend": "none"}, ""},
		{[]string{"max_sessions=default"}, map[string]any{"max_sessions": nil}, ""},
		{[]string{"archive.backend=s3", "archive.s3.endpoint=http://s3:9000", "archive.s3.bucket=123", "archive.s3.path_style=false"},
			map[string]any{"archive_backend": "s3", "archive_s3_endpoint": "http://s3:9000", "archive_s3_bucket": "123", "archive_s3_path_style": false}, ""},
		{[]string{"archive.s3.path_style=yes"}, nil, "want true or false"},
		{[]string{"max_sessions"}, nil, "want KEY=VALUE"},
		{[]string{"=3"}, nil, "want KEY=VALUE"},
		{[]string{"max_sessions="}, nil, "want KEY=VALUE"},
		{[]string{"a=1", "a=2"}, nil, "given twice"},
	} {
		got, err := parseSettingArgs(tc.args)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: err %v, want %q", tc.args, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %v %v, want %v", tc.args, got, err, tc.want)
		}
	}
}
