package profiles_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"testing"

	"github.com/sandboxd/sandboxd/profiles"
)

// maxCompiledRules bounds which accepted profiles the fuzzer also compiles:
// libseccomp takes ~200 ms for the full payload profile, which would stall
// the fuzzer on every mutation of it that still parses, while the corner
// cases the compile check is for live in small profiles.
const maxCompiledRules = 40

// FuzzParse fuzzes the seccomp profile loader (Docker/OCI JSON, the format
// of a Kubernetes Localhost profile). For any bytes Parse must not panic. A
// profile it accepts must be one JSON value, carry the sha256 of exactly the
// bytes given (that digest is what the audit trail attests), resolve to a
// non-empty program for this architecture, and - Parse's promise that
// anything the compiler could not express exactly is refused up front -
// compile with BPF into a whole number of sock_filter instructions.
//
// `go test` runs the seed corpus in testdata/fuzz/FuzzParse and both
// embedded profiles; `make fuzz` explores further.
func FuzzParse(f *testing.F) {
	// The embedded profiles are seeds of the plain `go test` run only: at
	// ~20 KiB each they would slow every mutation and make the engine spend
	// its minimisation budget on them. The fuzzer starts from the small
	// profiles in testdata, which cover the same vocabulary.
	if fl := flag.Lookup("test.fuzz"); fl == nil || fl.Value.String() == "" {
		for _, name := range []string{profiles.PayloadName, profiles.WorkerName} {
			raw, err := profiles.Embedded(name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(raw)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := profiles.Parse(data, "fuzz.json")
		if err != nil {
			if p != nil {
				t.Fatal("a refused profile came back non-nil")
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input that is not one JSON value: %q", data)
		}
		sum := sha256.Sum256(data)
		if p.SHA256 != hex.EncodeToString(sum[:]) || p.Name != "fuzz.json" {
			t.Fatalf("profile identity: sha256 %s name %q", p.SHA256, p.Name)
		}
		if p.Seccomp == nil {
			t.Fatal("accepted profile has no resolved filter")
		}
		if len(p.Seccomp.Syscalls) > maxCompiledRules {
			return
		}
		prog, err := p.BPF()
		if err != nil {
			t.Fatalf("Parse accepted a profile that does not compile: %v\n%s", err, data)
		}
		if len(prog) == 0 || len(prog)%8 != 0 {
			t.Fatalf("compiled program is %d bytes; want a non-empty sock_filter array", len(prog))
		}
	})
}
