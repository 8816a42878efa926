package spec_test

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/sandboxd/sandboxd/nsinit/spec"
)

// Independent restatements of the spec's shape rules (not spec's own
// matchers), so the fuzzer checks the decoder against the contract rather
// than against itself.
var (
	tokenRe   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	envNameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// FuzzDecodeSpec fuzzes the launch-spec decoder, the helper's whole input
// from across the privilege boundary. For any bytes it must not panic, and
// Decode (the fd reader) and DecodeBytes must agree. A spec it accepts must
// be exactly one JSON value and satisfy the contract: a token exec id and
// workspace (one path component, no dot, no slash), network "none", no NUL in
// the code, a Process carrying nothing but env (unique, well-formed names, no
// NUL) and allowed rlimits (soft <= hard). Re-encoding an accepted spec and
// decoding it again must be accepted and reach a fixpoint, so the supervisor
// and the helper can never read one spec two ways.
//
// `go test` runs the seed corpus in testdata/fuzz/FuzzDecodeSpec; `make fuzz`
// explores further.
func FuzzDecodeSpec(f *testing.F) {
	valid := spec.LaunchSpec{
		Version: spec.Version, ExecID: "0123456789abcdef0123456789abcdef", CallerUID: 1001,
		Runtime: "python", Workspace: "0123456789abcdef", Code: []byte("print(1)\n"),
		Network: spec.NetworkNone, TmpSizeBytes: 256 << 20,
		Process: specs.Process{
			Env:     []string{"API_TOKEN=x", "EMPTY=", "EQ=a=b"},
			Rlimits: []specs.POSIXRlimit{{Type: "RLIMIT_NOFILE", Soft: 1024, Hard: 1024}, {Type: "RLIMIT_FSIZE", Soft: 1 << 30, Hard: 1 << 30}},
		},
	}
	b, err := json.Marshal(valid)
	if err != nil {
		f.Fatal(err)
	}
	// The encoding of the Go type, so a field added to LaunchSpec is seeded
	// too; the rest of the corpus is in testdata.
	f.Add(b)

	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := spec.DecodeBytes(data)
		s2, err2 := spec.Decode(bytes.NewReader(data))
		if (err == nil) != (err2 == nil) {
			t.Fatalf("DecodeBytes and Decode disagree: %v vs %v", err, err2)
		}
		if err != nil {
			if s != nil {
				t.Fatal("a refused spec came back non-nil")
			}
			return
		}
		if s2 == nil {
			t.Fatal("Decode accepted but returned nil")
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input that is not exactly one JSON value: %q", data)
		}
		checkAcceptedSpec(t, s)

		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("re-encode an accepted spec: %v", err)
		}
		again, err := spec.DecodeBytes(enc)
		if err != nil {
			t.Fatalf("an accepted spec, re-encoded, is refused: %v\n%s", err, enc)
		}
		enc2, err := json.Marshal(again)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc, enc2) {
			t.Fatalf("re-encoding does not reach a fixpoint:\n%s\n%s", enc, enc2)
		}
	})
}

func checkAcceptedSpec(t *testing.T, s *spec.LaunchSpec) {
	t.Helper()
	if s.Version != spec.Version {
		t.Fatalf("accepted version %d", s.Version)
	}
	if !tokenRe.MatchString(s.ExecID) || !tokenRe.MatchString(s.Workspace) {
		t.Fatalf("accepted exec_id %q / workspace %q", s.ExecID, s.Workspace)
	}
	if s.Runtime == "" || s.Network != spec.NetworkNone || s.TmpSizeBytes < 0 {
		t.Fatalf("accepted runtime %q network %q tmp_size_bytes %d", s.Runtime, s.Network, s.TmpSizeBytes)
	}
	if bytes.IndexByte(s.Code, 0) >= 0 {
		t.Fatal("accepted code with a NUL byte")
	}
	// Process: nothing but env and rlimits. Compare the encoding of the
	// rest with that of an empty Process, so a field added to
	// runtime-spec's Process later is covered too.
	rest := s.Process
	rest.Env, rest.Rlimits = nil, nil
	got, _ := json.Marshal(rest)
	want, _ := json.Marshal(specs.Process{})
	if !bytes.Equal(got, want) {
		t.Fatalf("accepted a process with fields the helper must build itself: %s", got)
	}
	seen := map[string]bool{}
	for _, kv := range s.Process.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !envNameRe.MatchString(name) || strings.IndexByte(kv, 0) >= 0 || seen[name] {
			t.Fatalf("accepted env entry %q (env %q)", kv, s.Process.Env)
		}
		seen[name] = true
	}
	for _, rl := range s.Process.Rlimits {
		if !spec.AllowedRlimits[rl.Type] || rl.Soft > rl.Hard {
			t.Fatalf("accepted rlimit %+v", rl)
		}
	}
}
