package workspace

import (
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func artifactPaths(arts []Artifact) []string {
	out := []string{}
	for _, a := range arts {
		out = append(out, a.Path)
	}
	return out
}

// checkArtifacts verifies each artifact's size, sha256 and content against
// the file on disk.
func checkArtifacts(t *testing.T, dir string, arts []Artifact) {
	t.Helper()
	for _, a := range arts {
		b, err := base64.StdEncoding.DecodeString(a.ContentBase64)
		if err != nil {
			t.Fatalf("%s: bad base64: %v", a.Path, err)
		}
		if int64(len(b)) != a.Size || a.SHA256 != sha(string(b)) {
			t.Errorf("%s: size %d sha %s do not describe its %d bytes", a.Path, a.Size, a.SHA256, len(b))
		}
		if disk := readFile(t, filepath.Join(dir, a.Path)); disk != string(b) {
			t.Errorf("%s: content differs from the file", a.Path)
		}
	}
}

func collectTree(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "report.txt"), "the report")
	writeFile(t, filepath.Join(dir, "data.csv"), "a,b\n")
	writeFile(t, filepath.Join(dir, "outputs/a.png"), "PNG a")
	writeFile(t, filepath.Join(dir, "outputs/b.png"), "PNG bb")
	writeFile(t, filepath.Join(dir, "outputs/c.txt"), "c")
	writeFile(t, filepath.Join(dir, "outputs/sub/d.png"), "PNG d")
	writeFile(t, filepath.Join(dir, "a/x"), "ax")
	writeFile(t, filepath.Join(dir, "a0"), "a0")
	writeFile(t, filepath.Join(dir, "outputs/"+TempPrefix+"e.png"), "partial upload")
	symlink(t, "outputs/a.png", filepath.Join(dir, "link.png"))
	symlink(t, "a.png", filepath.Join(dir, "outputs/link.png"))
	symlink(t, "outputs", filepath.Join(dir, "linkdir"))
	mkfifo(t, filepath.Join(dir, "fifo.png"))
	mkdir(t, filepath.Join(dir, "x.png"))
	return dir
}

func TestCollectGlobs(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	tests := []struct {
		patterns []string
		want     []string
	}{
		{[]string{"report.txt"}, []string{"report.txt"}},
		{[]string{"outputs/*.png"}, []string{"outputs/a.png", "outputs/b.png"}},
		{[]string{"*.png"}, []string{}},                        // symlink, FIFO, directory: never
		{[]string{"linkdir/*"}, []string{}},                    // never through a symlinked directory
		{[]string{"*/*/*.png"}, []string{"outputs/sub/d.png"}}, // "*" does not cross "/"
		{[]string{"outputs/[ab].png"}, []string{"outputs/a.png", "outputs/b.png"}},
		{[]string{"outputs/*", "report.txt", "outputs/a.png"}, []string{"outputs/a.png", "outputs/b.png", "outputs/c.txt", "report.txt"}},
		{[]string{"a*", "a/*"}, []string{"a/x", "a0"}}, // sorted by path
		{[]string{"nomatch*"}, []string{}},
		{[]string{"outputs/" + TempPrefix + "*"}, []string{}}, // temp uploads: never
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := collectTree(t)
		w := openWS(t, dir, 0, r)
		for _, tt := range tests {
			arts, truncated, err := w.Collect(tt.patterns, ArtifactLimits{})
			if err != nil {
				t.Fatalf("Collect(%q): %v", tt.patterns, err)
			}
			if got := artifactPaths(arts); !reflect.DeepEqual(got, tt.want) || truncated {
				t.Errorf("Collect(%q) = %q, truncated %v; want %q", tt.patterns, got, truncated, tt.want)
			}
			checkArtifacts(t, dir, arts)
			again, _, _ := w.Collect(tt.patterns, ArtifactLimits{})
			if !reflect.DeepEqual(arts, again) {
				t.Errorf("Collect(%q) is not deterministic", tt.patterns)
			}
		}
		if arts, _, _ := w.Collect(nil, ArtifactLimits{}); len(arts) != 0 {
			t.Errorf("no patterns gave %d artifacts", len(arts))
		}
	})
}

// Collect walks only the directories its patterns can reach: a tree over
// the walk limit elsewhere does not stop it.
func TestCollectPrunes(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "outputs/plot.png"), "png")
	writeFile(t, filepath.Join(dir, "report.txt"), "r")
	for i := 0; i < 50; i++ {
		writeFile(t, filepath.Join(dir, "node_modules", fmt.Sprint("m", i), "index.js"), "js")
	}
	w := openWS(t, dir, 0, resolver{"default", haveOpenat2()})
	w.maxEntries = 20
	tests := []struct {
		patterns []string
		want     []string
		err      error
	}{
		{[]string{"outputs/*.png", "report.txt"}, []string{"outputs/plot.png", "report.txt"}, nil},
		{[]string{"out*/*"}, []string{"outputs/plot.png"}, nil},
		{[]string{"*/*.png"}, nil, ErrTreeTooLarge},     // reaches node_modules
		{[]string{"outputs[/]x"}, nil, ErrTreeTooLarge}, // a class prunes nothing
	}
	for _, tt := range tests {
		arts, _, err := w.Collect(tt.patterns, ArtifactLimits{})
		if !isErr(err, tt.err) {
			t.Errorf("Collect(%q) = %v, want %v", tt.patterns, err, tt.err)
			continue
		}
		if err == nil && !reflect.DeepEqual(artifactPaths(arts), tt.want) {
			t.Errorf("Collect(%q) = %q, want %q", tt.patterns, artifactPaths(arts), tt.want)
		}
	}
	for _, tt := range []struct {
		pattern, dir string
		want         bool
	}{
		{"a/b/c", "a", true},
		{"a/b/c", "a/b", true},
		{"a/b/c", "a/b/c", false},
		{"a/b/c", "x", false},
		{"*/b/c", "x", true},
		{"*/b/c", "x/y", false},
		{"?/c", "ab", false},
		{"a[/]b", "zzz", true},
		{"report.txt", "outputs", false},
	} {
		if got := mayMatchBelow([]string{tt.pattern}, tt.dir); got != tt.want {
			t.Errorf("mayMatchBelow(%q, %q) = %v", tt.pattern, tt.dir, got)
		}
	}
}

func TestCollectBadPatterns(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	tests := []struct {
		pattern string
		want    error
	}{
		{"", ErrInvalidPath},
		{"/etc/*", ErrEscape},
		{"../*", ErrEscape},
		{"a/../../*", ErrEscape},
		{"a//b", ErrInvalidPath},
		{"./a", ErrInvalidPath},
		{"[", ErrInvalidPath},
		{"a\\*", ErrInvalidPath},
		{"a\x00", ErrInvalidPath},
	}
	w := openWS(t, t.TempDir(), 0, resolver{"default", haveOpenat2()})
	for _, tt := range tests {
		if _, _, err := w.Collect([]string{"ok", tt.pattern}, ArtifactLimits{}); !errors.Is(err, tt.want) {
			t.Errorf("Collect(%q) = %v, want %v", tt.pattern, err, tt.want)
		}
	}
}

func TestCollectLimits(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	tests := []struct {
		name      string
		files     map[string]int // path -> size
		lim       ArtifactLimits
		want      []string
		truncated bool
	}{
		{"within all limits", map[string]int{"a": 10, "b": 10}, ArtifactLimits{MaxFileBytes: 10, MaxFiles: 2, MaxTotalBytes: 20}, []string{"a", "b"}, false},
		{"one file too big", map[string]int{"a": 10, "b": 11, "c": 1}, ArtifactLimits{MaxFileBytes: 10}, []string{"a", "c"}, true},
		{"too many files", map[string]int{"c": 1, "a": 1, "b": 1}, ArtifactLimits{MaxFiles: 2}, []string{"a", "b"}, true},
		{"total exceeded", map[string]int{"a": 4, "b": 4, "c": 4, "d": 1}, ArtifactLimits{MaxTotalBytes: 9}, []string{"a", "b", "d"}, true},
		{"defaults", map[string]int{"a": 1 << 20}, ArtifactLimits{}, []string{"a"}, false},
		{"default per-file limit", map[string]int{"a": DefaultMaxArtifactFileBytes + 1}, ArtifactLimits{}, []string{}, true},
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				dir := t.TempDir()
				for p, n := range tt.files {
					writeFile(t, filepath.Join(dir, p), strings.Repeat("z", n))
				}
				w := openWS(t, dir, 0, r)
				arts, truncated, err := w.Collect([]string{"*"}, tt.lim)
				if err != nil {
					t.Fatal(err)
				}
				if got := artifactPaths(arts); !reflect.DeepEqual(got, tt.want) || truncated != tt.truncated {
					t.Errorf("Collect = %q, truncated %v; want %q, %v", got, truncated, tt.want, tt.truncated)
				}
				checkArtifacts(t, dir, arts)
			})
		}
	})
}

// A file growing while Collect reads it is never returned over the limit,
// and what is returned is consistent (size and sha256 of the bytes read).
func TestCollectGrowingFile(t *testing.T) {
	if !unprivileged(t) {
		return
	}
	forEachResolver(t, func(t *testing.T, r resolver) {
		dir := t.TempDir()
		p := filepath.Join(dir, "grow.log")
		writeFile(t, p, "")
		w := openWS(t, dir, 0, r)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if fi, _ := f.Stat(); fi.Size() > 4096 {
					_ = f.Truncate(0)
				}
				_, _ = f.Write([]byte("0123456789"))
			}
		}()
		const max = 2000
		sawTooBig := false
		for i := 0; i < 500; i++ {
			arts, truncated, err := w.Collect([]string{"*.log"}, ArtifactLimits{MaxFileBytes: max})
			if err != nil {
				t.Fatal(err)
			}
			sawTooBig = sawTooBig || truncated
			for _, a := range arts {
				b, _ := base64.StdEncoding.DecodeString(a.ContentBase64)
				if a.Size > max || int64(len(b)) != a.Size || sha(string(b)) != a.SHA256 {
					t.Fatalf("artifact of %d bytes (limit %d) with %d bytes of content", a.Size, max, len(b))
				}
			}
		}
		close(stop)
		wg.Wait()
		if !sawTooBig {
			t.Log("the file never outgrew the limit during a read")
		}
	})
}
