package runners

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/kernel/protocol"
)

// testLargeOutput runs code that writes 10 MiB to stdout and then waits
// for a file named "gate" in its working directory. The test creates the
// gate only after it has received all 10 MiB as stream frames: a runner
// that buffered the output until the exec ends would never get there.
func testLargeOutput(t *testing.T, lang, code string) {
	k := startKernel(t, lang)
	id := k.send(code)
	const total = 10 << 20
	got, frames := 0, 0
	deadline := time.Now().Add(120 * time.Second)
	for got < total {
		f := k.next(time.Until(deadline))
		s, ok := f.(*protocol.Stream)
		if !ok || s.ID != id || s.Name != protocol.StreamStdout {
			t.Fatalf("frame %#v while the exec streams", f)
		}
		if len(s.Data) > protocol.MaxFrameBytes/2 {
			t.Fatalf("one stream frame of %d bytes: the runner buffered", len(s.Data))
		}
		got += len(s.Data)
		frames++
	}
	if err := os.WriteFile(filepath.Join(k.dir, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r := k.collect(id, 60*time.Second).mustOK(t)
	if got != total || r.stdout != "done\n" {
		t.Fatalf("streamed %d bytes then %q", got, r.stdout)
	}
	t.Logf("%s: 10 MiB in %d frames before the exec ended", lang, frames)
}

// The runners' frame limit must be the decoder's.
func TestRunnersFrameLimitMatchesProtocol(t *testing.T) {
	for lang, re := range map[string]*regexp.Regexp{
		"python":     regexp.MustCompile(`(?m)^MAX_FRAME_BYTES = 32 << 20\b`),
		"javascript": regexp.MustCompile(`(?m)^const MAX_FRAME_BYTES = 32 \* 1024 \* 1024;`),
	} {
		src, err := Source(lang)
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(src) || protocol.MaxFrameBytes != 32<<20 {
			t.Fatalf("%s runner's MAX_FRAME_BYTES does not match protocol.MaxFrameBytes (%d)", lang, protocol.MaxFrameBytes)
		}
	}
	if _, err := Source("ruby"); err == nil || !strings.Contains(err.Error(), "ruby") {
		t.Fatalf("Source(ruby) = %v", err)
	}
}
