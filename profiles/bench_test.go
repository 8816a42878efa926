package profiles

import "testing"

// BenchmarkPayloadBPF measures what nsinit does per launch: parse, validate
// and resolve payload.json, then compile it to cBPF with libseccomp.
func BenchmarkPayloadBPF(b *testing.B) {
	raw, err := Embedded(PayloadName)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p, err := Parse(raw, PayloadName)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.BPF(); err != nil {
			b.Fatal(err)
		}
	}
}
