package workspace

import (
	"strings"
	"testing"
)

func TestValidatePath(t *testing.T) {
	tests := []struct {
		path string
		want error
	}{
		{"a", nil},
		{"a.txt", nil},
		{".hidden", nil},
		{"..a", nil},
		{"a..", nil},
		{"dir/sub/file.csv", nil},
		{"with space/ünïcode ✓.txt", nil},
		{strings.Repeat("a", 255), nil},
		{strings.Repeat("a/", 2047) + "bc", nil}, // 4096 bytes
		{"", ErrInvalidPath},
		{".", ErrInvalidPath},
		{"./a", ErrInvalidPath},
		{"a/./b", ErrInvalidPath},
		{"a//b", ErrInvalidPath},
		{"a/", ErrInvalidPath},
		{"a\x00b", ErrInvalidPath},
		{"a\\b", ErrInvalidPath},
		{"..\\a", ErrInvalidPath},
		{"a\nb", ErrInvalidPath},
		{"a\tb", ErrInvalidPath},
		{"a\x7fb", ErrInvalidPath},
		{"a\u0085b", ErrInvalidPath},
		{"a\xffb", ErrInvalidPath},
		{strings.Repeat("a", 256), ErrInvalidPath},
		{strings.Repeat("a/", 2048) + "b", ErrInvalidPath}, // 4097 bytes
		{TempPrefix + "x", ErrInvalidPath},
		{"d/" + TempPrefix + "x", ErrInvalidPath},
		{"/", ErrEscape},
		{"/etc/passwd", ErrEscape},
		{"..", ErrEscape},
		{"../x", ErrEscape},
		{"a/../b", ErrEscape},
		{"a/..", ErrEscape},
		{"a/b/../../..", ErrEscape},
	}
	for _, tt := range tests {
		name := tt.path
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			err := ValidatePath(tt.path)
			if !isErr(err, tt.want) {
				t.Fatalf("ValidatePath(%q) = %v, want %v", tt.path, err, tt.want)
			}
		})
	}
}

func FuzzValidatePath(f *testing.F) {
	for _, s := range []string{"a", "a/b", "../a", "/a", "a//b", "a\\b", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if ValidatePath(p) != nil {
			return
		}
		// Whatever passes is relative, clean and free of "..".
		if p == "" || p[0] == '/' || strings.Contains(p, "//") || strings.HasSuffix(p, "/") {
			t.Fatalf("accepted %q", p)
		}
		for _, c := range strings.Split(p, "/") {
			if c == ".." || c == "." {
				t.Fatalf("accepted %q", p)
			}
		}
	})
}
