package runners

import (
	"os/exec"
	"testing"
)

// BenchmarkExecWarm is one exec of a print in a warm kernel, through the
// protocol: the round trip a session exec in kernel mode costs inside the
// sandbox. BenchmarkExecBare is a fresh interpreter printing the same, what
// a process-mode exec costs at the least. Issue 11's target: warm ≤ 0.3 ×
// bare.
func BenchmarkExecWarm(b *testing.B) {
	for _, tc := range []struct{ lang, code string }{{"python", "print(1)"}, {"javascript", "console.log(1)"}} {
		b.Run(tc.lang, func(b *testing.B) {
			k := startKernel(b, tc.lang)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if r := k.exec(tc.code); r.stdout != "1\n" {
					b.Fatalf("stdout %q", r.stdout)
				}
			}
		})
	}
}

func BenchmarkExecBare(b *testing.B) {
	for _, tc := range []struct {
		name string
		argv []string
	}{
		{"python", []string{"/usr/bin/python3", "-c", "print(1)"}},
		{"javascript", []string{"/usr/bin/node", "-e", "console.log(1)"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if out, err := exec.Command(tc.argv[0], tc.argv[1:]...).Output(); err != nil || string(out) != "1\n" {
					b.Fatalf("%q: %v", out, err)
				}
			}
		})
	}
}
