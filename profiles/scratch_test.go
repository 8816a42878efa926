package profiles

import ("testing";"os")

func TestScratch(t *testing.T) {
	p, err := LoadEmbedded(PayloadName)
	if err != nil { t.Fatal(err) }
	b, err := p.BPF()
	if err != nil { t.Fatal(err) }
	os.WriteFile("/tmp/payload.bpf", b, 0644)
}
